# ruff: noqa: F811 - the fixtures imported from appenv_fixtures are requested by name
"""The app's requirements read, planned and configured (``kernel_ext.appenv``), with no sandbox:
what a requirements.txt may ask for, what the server already meets, the cache key, the operator's
switches, and the refusal when no source may provide a package (nothing written)."""

from __future__ import annotations

import importlib.metadata

import pytest
from appenv_fixtures import no_sources  # noqa: F401 - a fixture, requested by name

from kernel_ext.appenv.environment import environment_for
from kernel_ext.appenv.overlay import overlay_key
from kernel_ext.appenv.plan import plan_for
from kernel_ext.appenv.requirements import MAX_BYTES, MAX_LINE_CHARS, MAX_REQUIREMENTS, read_requirements
from kernel_ext.appenv.settings import AppEnvSettings
from kernel_ext.errors import ToolFailure


def test_lines_that_would_choose_where_packages_come_from_are_named_and_ignored():
    listed = read_requirements(
        "fastapi>=0.100  # the web framework\n--index-url https://evil.example/simple\n-r other.txt\n-e ./local\n"
        "https://evil.example/pkg.whl\nsomething @ https://evil.example/x.whl\nnot a requirement!!\n"
        "pywin32; sys_platform == 'win32'\nFastAPI<1\n\n# a comment\n"
    )
    assert [str(r) for r in listed.requirements] == ["fastapi<1,>=0.100"]  # two lines for one package: both hold
    reasons = dict(listed.unusable)
    assert set(reasons) == {"--index-url https://evil.example/simple", "-r other.txt", "-e ./local",
                            "https://evil.example/pkg.whl", "something @ https://evil.example/x.whl"}
    assert [line for line, _why in listed.invalid] == ["not a requirement!!"]  # not ignored: refused by name
    assert "operator" in reasons["--index-url https://evil.example/simple"]
    assert "operator" in reasons["something @ https://evil.example/x.whl"]


def test_an_oversized_requirements_file_is_not_read():
    listed = read_requirements(b"a\n" * 40_000)
    assert listed.requirements == () and "not read" in listed.unusable[0][1]


def test_the_plan_uses_what_the_server_has_and_names_what_it_lacks():
    fastapi = importlib.metadata.version("fastapi")
    listed = read_requirements(f"fastapi=={fastapi}\nfastapi-nope-besser>=1\npydantic<1\n")
    plan = plan_for(listed.requirements)
    assert [(p.name, p.version, p.where) for p in plan.provided] == [("fastapi", fastapi, "server")]
    assert [r.name for r in plan.missing] == ["fastapi-nope-besser", "pydantic"]
    assert [(r.name, v) for r, v in plan.wrong_version] == [("pydantic", importlib.metadata.version("pydantic"))]


def test_the_cache_key_follows_the_requirements_set_not_its_order():
    a = read_requirements("b>=1\na==2\n").requirements
    b = read_requirements("a==2\nb>=1\n").requirements
    c = read_requirements("a==3\nb>=1\n").requirements
    assert overlay_key(a) == overlay_key(b) != overlay_key(c)


# -- what cannot be provided ------------------------------------------------------------------------


def test_without_a_source_a_missing_package_is_one_named_refusal(no_sources, tmp_path):
    with pytest.raises(ToolFailure) as caught:
        environment_for("besser-no-such-package==9\nfastapi\n")
    assert caught.value.code == "requirements_unmet"
    message = caught.value.message
    assert "besser-no-such-package==9 (not installed)" in message and "fastapi" not in message.split("needs")[1].split("which")[0]
    assert "BESSER_APP_WHEELHOUSE" in message and "BESSER_APP_ENV_NETWORK" in message
    assert not (tmp_path / "cache").exists()  # nothing was built, nothing written


def test_settings_come_from_the_operator_environment(tmp_path):
    settings = AppEnvSettings.from_environment({"BESSER_APP_WHEELHOUSE": str(tmp_path), "BESSER_APP_ENV_NETWORK": "1",
                                                "BESSER_APP_ENV_BUILD_SECONDS": "-5", "XDG_CACHE_HOME": str(tmp_path / "c")})
    assert settings.wheelhouse == tmp_path and settings.network and settings.can_fetch
    assert settings.build_seconds == 600.0  # a nonsense value keeps the default
    assert settings.cache == tmp_path / "c" / "besser-agent" / "app-envs"
    assert not AppEnvSettings.from_environment({}).can_fetch


def test_extras_count_only_when_their_packages_are_installed():
    import importlib.util

    plan = plan_for(read_requirements("uvicorn\npydantic[besser-no-such-extra]\n").requirements)
    assert [p.name for p in plan.provided] == ["uvicorn", "pydantic"]  # an unknown extra adds nothing
    if importlib.util.find_spec("email_validator") is None:
        plan = plan_for(read_requirements("pydantic[email]\n").requirements)
        assert [r.name for r in plan.missing] == ["pydantic"]  # pydantic is here, email-validator is not


def test_variables_and_file_names_are_not_requirements():
    listed = read_requirements("zz===${PATH}\nx.whl\nrequirements.tar.gz\nfastapi\n")
    assert [r.name for r in listed.requirements] == ["fastapi"]
    reasons = dict(listed.unusable)
    assert "environment variable" in reasons["zz===${PATH}"]
    assert "file name" in reasons["x.whl"] and "file name" in reasons["requirements.tar.gz"]


def test_the_configuration_says_where_an_apps_packages_may_come_from(tmp_path, monkeypatch):
    from kernel_ext.hosting.options import OperatorSettings
    from kernel_ext.server.report import describe_configuration

    monkeypatch.delenv("BESSER_APP_ENV_NETWORK", raising=False)
    monkeypatch.delenv("BESSER_APP_WHEELHOUSE", raising=False)
    closed = describe_configuration(OperatorSettings())["app_environment"]
    assert closed["fetches"] is False and closed["sources"].startswith("none")
    monkeypatch.setenv("BESSER_APP_WHEELHOUSE", str(tmp_path))
    monkeypatch.setenv("BESSER_APP_ENV_NETWORK", "1")
    opened = describe_configuration(OperatorSettings())["app_environment"]
    assert opened["fetches"] is True and str(tmp_path) in opened["sources"] and "package index" in opened["sources"]


def _planted_scratch(tmp_path, victim):
    """A build folder as a hostile package build could leave it: the manifest's name planted as a link
    to a host file, a dist-info folder that is a link, a FIFO for metadata."""
    import os

    scratch = tmp_path / "cache" / ".build-k"
    (scratch / "site" / "good_pkg-1.0.dist-info").mkdir(parents=True)
    os.mkfifo(scratch / "site" / "good_pkg-1.0.dist-info" / "METADATA")
    (scratch / "env.json").symlink_to(victim)
    (scratch / "site" / "evil-6.6.6.dist-info").symlink_to(victim.parent)
    return scratch


def test_sealing_a_build_trusts_nothing_the_sandbox_wrote(tmp_path):
    import time

    from kernel_ext.appenv.overlay import _seal, cached_overlay

    victim = tmp_path / "host" / "bashrc"
    victim.parent.mkdir()
    victim.write_text("the host's own file\n")
    scratch = _planted_scratch(tmp_path, victim)
    (tmp_path / "cache").chmod(0o700)  # private, as the server makes it before a build
    settings = AppEnvSettings(cache=tmp_path / "cache")
    overlay = _seal(scratch, settings, "k", read_requirements("good-pkg==1.0\n").requirements, time.perf_counter())
    assert victim.read_text() == "the host's own file\n"  # no write through the planted name
    assert overlay.packages == (("good-pkg", "1.0"),)  # from folder names: no METADATA opened (a FIFO would hang)
    manifest = tmp_path / "cache" / "k" / "env.json"
    assert manifest.is_file() and not manifest.is_symlink()
    assert cached_overlay(settings, "k").packages == overlay.packages


def test_a_build_whose_site_is_a_link_is_refused_and_nothing_is_cached(tmp_path):
    import time

    from kernel_ext.appenv.overlay import _seal

    host = tmp_path / "host"
    host.mkdir()
    scratch = tmp_path / "cache" / ".build-k"
    scratch.mkdir(parents=True)
    (scratch / "site").symlink_to(host)
    with pytest.raises(ToolFailure) as caught:
        _seal(scratch, AppEnvSettings(cache=tmp_path / "cache"), "k", (), time.perf_counter())
    assert caught.value.code == "requirements_unmet" and "link" in caught.value.message
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [".build-k"] and list(host.iterdir()) == []


def test_an_unreadable_line_is_named_by_the_first_line_of_the_reader_s_own_words_cut_at_120():
    from packaging.requirements import InvalidRequirement, Requirement

    with pytest.raises(InvalidRequirement) as parsed:
        Requirement("pkg !!")
    listed = read_requirements("pkg !!\n")
    assert listed.invalid == (("pkg !!", f"not a requirement: {str(parsed.value).splitlines()[0]}"),)
    long_version = 'pkg; python_version ~= "' + "x" * 200 + '"'
    (line, reason), = read_requirements(long_version).invalid
    assert line == long_version[:200] and reason.startswith("cannot be evaluated: Undefined")
    assert len(reason) == len("cannot be evaluated: ") + 120 and reason.endswith("x" * 20)


def test_two_lines_for_one_package_keep_both_constraints_and_every_extra():
    listed = read_requirements("pkg[a]>=1\nPKG[b]<3\n")
    assert [str(r) for r in listed.requirements] == ["pkg[a,b]<3,>=1"]


NESTED = "a nested requirements file: not followed"
EDITABLE = "an editable install: not supported for the app's environment"
OPTION = "an installer option: where packages come from is the operator's choice"
URL = "a URL: packages come only from the operator's sources"
VARIABLE = "an environment variable: not expanded for an app's requirements"
FILE_NAME = "a file name: packages come only from the operator's sources"
DIRECT_URL = "a direct URL: packages come only from the operator's sources"


@pytest.mark.parametrize(("line", "reason"), [
    ("-r more.txt", NESTED), ("--requirement more.txt", NESTED), ("-c pins.txt", NESTED), ("--constraint pins.txt", NESTED),
    ("-e ./local", EDITABLE), ("--editable ./local", EDITABLE), ("--index-url https://evil.example/simple", OPTION),
    ("https://evil.example/simple/pkg", URL), ("pkg==${VERSION}", VARIABLE),
    ("pkg.whl; python_version > '3'", FILE_NAME), ("local dir/pkg-1.0.tar.gz", FILE_NAME),
    ("pkg @ https://evil.example/pkg", DIRECT_URL),
])
def test_each_line_that_chooses_a_source_is_refused_in_its_own_words(line, reason):
    listed = read_requirements(f"fastapi\n{line}\n")
    assert listed.unusable == ((line, reason),) and [str(r) for r in listed.requirements] == ["fastapi"]
    assert listed.invalid == ()


def test_comments_blank_lines_and_bytes_are_read_as_pip_reads_them():
    listed = read_requirements("\tfastapi  # one # two\n\n\t# a tab before a comment\nuvicorn\n")
    assert [str(r) for r in listed.requirements] == ["fastapi", "uvicorn"] and listed.invalid == ()
    listed = read_requirements("fastapi  # caf\u00e9\n".encode() + b"pk\xffg\n")
    assert [str(r) for r in listed.requirements] == ["fastapi"]
    assert [line for line, _why in listed.invalid] == ["pk\ufffdg"]  # an undecodable byte is replaced, then named


def test_the_bounds_hold_at_their_edges():
    exactly = (b"pkg\n" + b"#" * (MAX_BYTES - 5) + b"\n")
    assert len(exactly) == MAX_BYTES and [str(r) for r in read_requirements(exactly).requirements] == ["pkg"]
    over = read_requirements(exactly + b"x")
    assert over.requirements == () and over.unusable == (
        (f"requirements.txt ({MAX_BYTES + 1} bytes)", f"longer than {MAX_BYTES} bytes: not read"),)
    longest = "pkg[" + "x" * (MAX_LINE_CHARS - 5) + "]"
    assert len(longest) == MAX_LINE_CHARS and len(read_requirements(longest).requirements) == 1
    assert read_requirements(longest + " ").requirements  # trailing blanks are not the line's
    too_long = longest[:-1] + "x]"
    assert read_requirements(too_long).invalid == ((too_long[:200], f"longer than {MAX_LINE_CHARS} characters: not read"),)
    many = "".join(f"pkg{i}\n" for i in range(MAX_REQUIREMENTS + 1))
    listed = read_requirements(many)
    assert len(listed.requirements) == MAX_REQUIREMENTS
    assert listed.unusable == ((f"pkg{MAX_REQUIREMENTS}", f"more than {MAX_REQUIREMENTS} requirements: the rest are not read"),)


def test_a_refused_line_is_quoted_to_200_characters():
    for line, reason in (("-r " + "x" * 300, NESTED), ("pkg @ https://evil.example/" + "x" * 300, DIRECT_URL),
                         ("pkg" + "x" * 300, "more")):
        text = "".join(f"p{i}\n" for i in range(MAX_REQUIREMENTS)) + line if reason == "more" else line
        (quoted, why), = read_requirements(text).unusable
        assert quoted == line[:200] and len(quoted) == 200 and why.startswith(reason if reason != "more" else "more than")


def test_a_marker_on_the_extra_is_evaluated_with_no_extra():
    listed = read_requirements("always; extra == ''\nonly-dev; extra == 'dev'\n")
    assert [str(r) for r in listed.requirements] == ["always"] and listed.invalid == ()
