"""The Landlock tier's rule set as the launcher receives it (mutation testing found /proc and "listable" unpinned).

A Landlock sandbox reads the system folders and /proc, writes only the run's folders, and may
list (not read) the folders around what is hidden, such as /etc around /etc/shadow. A root
server's Landlock sandbox holds no capability (Landlock alone leaves root's powers over
processes and ownership); the off tier, the operator's override, is the server's user as is.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sandbox_fixtures import make_run, tier_param

from kernel_ext.sandbox import tiers
from kernel_ext.sandbox.oneoff import execute
from kernel_ext.sandbox.spec import Confinement, sensitive_paths
from kernel_ext.sandbox.tiers import landlock_rules


def effective_caps(status: str) -> int:
    found = re.search(r"^CapEff:\s*([0-9a-f]+)$", status, re.M)
    assert found, status
    return int(found.group(1), 16)


def test_the_rules_read_proc_list_around_hidden_files_and_write_only_the_run(tmp_path):
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    rules = landlock_rules(Confinement.for_run(ws, home, network=False))
    assert "/proc" in rules["read"] and "/usr" in rules["read"]
    assert "/etc" in rules["listable"] and "/etc" not in rules["read"]  # /etc holds shadow: listed, not read whole
    assert all(isinstance(p, str) and p.startswith("/") for p in rules["listable"])
    assert not {str(p) for p in sensitive_paths()} & set(rules["read"])
    assert rules["write"] == [str(ws), str(home)] and rules["devices"] == ["/dev"] and rules["deny_tcp"] is True


@pytest.mark.parametrize("policy", [tier_param("landlock"), tier_param("off")])
def test_a_landlock_sandbox_drops_every_capability_the_off_tier_keeps_the_servers(tmp_path, policy):
    run = make_run(tmp_path)
    conf = Confinement.for_run(run.ws, run.home, network=False)
    record = execute(tiers.choose_tier(policy), conf, ["cat", "/proc/self/status"], timeout=30)
    assert record.exit_code == 0, record.stderr.text
    ours = effective_caps(Path("/proc/self/status").read_text())
    assert effective_caps(record.stdout.text) == (0 if policy == "landlock" else ours)
