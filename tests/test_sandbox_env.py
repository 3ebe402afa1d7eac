"""The whole environment a sandboxed command gets, variable by variable (mutation testing found its shape unguarded).

``scrub_environment`` is the one builder every tier uses; the shell tests check what must not
arrive, these check that exactly the documented variables arrive, with the run's values.
"""

from __future__ import annotations

import os
import sys

from kernel_ext.sandbox.env import scrub_environment, split_secrets, user_site

PYTHON_BIN = os.path.dirname(sys.executable)
SITE = f"/h/.local/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"


def test_exactly_the_allowlist_arrives_with_the_runs_home_temp_and_python_paths():
    source = {
        "PATH": "/opt/tool/bin:relative/bin:/usr/bin", "TERM": "xterm", "LC_ALL": "C", "HOME": "/root",
        "TMPDIR": "/host-tmp", "EDITOR": "vim", "SESSION_ID": "s3ss10n-7f9a1c2e4b6d8f0a",
        "PIP_CERT": "/no/such/bundle.pem", "MIRROR_URL": "https://user:pw@mirror.example/simple",
    }
    scrubbed = scrub_environment(source, home="/h", tmpdir="/t")
    assert scrubbed.env == {
        "PATH": f"/h/.local/bin:{PYTHON_BIN}:/opt/tool/bin:/usr/bin",  # relative entries dropped
        "TERM": "xterm", "LC_ALL": "C",
        "HOME": "/h", "TMPDIR": "/t", "TMP": "/t", "TEMP": "/t",
        "LANG": "C.UTF-8",
        "PYTHONUSERBASE": "/h/.local", "PYTHONPATH": SITE,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    assert scrubbed.removed_names == ("MIRROR_URL", "PIP_CERT", "SESSION_ID") and scrubbed.secrets_removed == 3


def test_host_choices_that_are_allowed_are_kept():
    source = {"LANG": "de_DE.UTF-8", "PIP_DISABLE_PIP_VERSION_CHECK": "0"}
    env = scrub_environment(source, home="/h", tmpdir="/t").env
    assert env["LANG"] == "de_DE.UTF-8" and env["PIP_DISABLE_PIP_VERSION_CHECK"] == "0"
    assert env["PATH"].split(":")[:2] == ["/h/.local/bin", PYTHON_BIN]  # no host PATH: the default's entries follow
    assert env["PATH"].split(":")[2:] == [p for p in os.defpath.split(":") if os.path.isabs(p)]


def test_extras_pass_the_same_filter_values_included():
    kept, removed = split_secrets({"APP_MODE": "test", "INDEX": "https://u:p@pypi.example/simple", "API_PASS": "x"})
    assert kept == {"APP_MODE": "test"} and removed == ["INDEX", "API_PASS"]
    scrubbed = scrub_environment({}, home="/h", tmpdir="/t", extra={"APP_MODE": "test", "INDEX": "https://u:p@h/s"})
    assert scrubbed.env["APP_MODE"] == "test" and "INDEX" not in scrubbed.env
    assert scrubbed.removed_names == ("INDEX",) and scrubbed.secrets_removed == 1


def test_the_user_site_is_the_interpreters_own_under_the_run_home():
    assert user_site("/h") == SITE
