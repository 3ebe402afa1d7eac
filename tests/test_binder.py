"""The Binder environment: ``start`` sets demo mode and execs its arguments; the package a
``postBuild`` installs carries what enables the extension and the demo's recording.

``start`` is run for real (as repo2docker's entrypoint would run it, with a bare environment);
the wheel is built from this tree with pip, as ``postBuild``'s ``pip install .`` builds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
BIN = Path(sys.executable).parent

PROBE = """
import json, os
from kernel_ext.pipeline.generation import provider_from_spec
from kernel_ext.hosting.options import OperatorSettings
from kernel_ext.server.report import describe_configuration
spec = os.environ.get("BESSER_LLM_PROVIDER")
provider = None if spec in (None, "none") else provider_from_spec(spec)
print(json.dumps({
    "pid": os.getpid(),
    "argv": __import__("sys").argv[1:],
    "env": {k: v for k, v in os.environ.items() if k.startswith("BESSER_")},
    "config": describe_configuration(OperatorSettings.from_environment()),
    "provider": None if provider is None else [provider.kind, provider.label],
}))
"""


def run_start(*argv: str, **extra_env: str) -> tuple[subprocess.Popen, dict]:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8", **extra_env}
    proc = subprocess.Popen([str(BINDER / "start"), *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return proc, json.loads(out)


def test_start_execs_its_arguments_in_demo_mode():
    proc, seen = run_start("python", "-c", PROBE, "--an", "argument with spaces")
    assert seen["pid"] == proc.pid  # exec: the server replaces the script, no shell stays in between
    assert seen["argv"] == ["--an", "argument with spaces"]
    env = seen["env"]
    assert env["BESSER_LLM_PROVIDER"] == "replay"
    assert Path(env["BESSER_LLM_CASSETTE"]).name == "library-jwt.cassette.jsonl" and Path(env["BESSER_LLM_CASSETTE"]).is_file()
    assert env["BESSER_LLM_ENABLE_SHELL_TOOLS"] == "0" and env["BESSER_SANDBOX"] == "auto"
    assert seen["provider"] == ["replay", "replay:library-jwt.cassette.jsonl"]  # what a run without --provider uses
    config = seen["config"]
    assert config["provider"]["configured"] is True and config["provider"]["provider"] == "replay"
    assert config["features"]["shell_tools_enabled"] is False and config["sandbox"]["policy"] == "auto"
    assert not any(k.endswith("_API_KEY") for k in env)


def test_start_leaves_an_operator_choice_alone():
    _, seen = run_start("python", "-c", PROBE, BESSER_LLM_PROVIDER="none", BESSER_SANDBOX="landlock")
    assert seen["env"]["BESSER_LLM_PROVIDER"] == "none" and "BESSER_LLM_CASSETTE" not in seen["env"]
    assert seen["env"]["BESSER_SANDBOX"] == "landlock" and seen["provider"] is None


def test_start_ends_with_exec_and_the_build_files_are_sane():
    lines = [line.strip() for line in (BINDER / "start").read_text().splitlines() if line.strip()]
    assert lines[-1] == 'exec "$@"'
    for script in ("start", "postBuild"):
        path = BINDER / script
        assert os.access(path, os.X_OK), f"binder/{script} is not executable"
        assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0, f"binder/{script} does not parse"
    assert "bubblewrap" in (BINDER / "apt.txt").read_text().split()
    post = (BINDER / "postBuild").read_text()
    assert "pip install" in post and "jupyter server extension enable --sys-prefix kernel_ext" in post
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"


def test_readme_says_how_to_build_the_binder_link_to_notebook_01():
    readme = (ROOT / "README.md").read_text()
    assert "OWNER/REPO" not in readme  # no link to a repository that does not exist
    assert "https://mybinder.org/v2/gh/<owner>/<repo>/HEAD?urlpath=lab/tree/notebooks/01-library-prototyping.ipynb" in readme
    assert (ROOT / "notebooks" / "01-library-prototyping.ipynb").is_file()


def test_readme_ways_in_are_real():
    """The make targets it names exist, and its three notebook lines are the magic's own syntax,
    asking the shipped recording's request, with the ``--approve`` default the text describes."""
    import re

    from kernel_ext.magics.commands import _split, build_parser
    from kernel_ext.scenarios import library_jwt

    readme = (ROOT / "README.md").read_text()
    targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    assert {"lab", "test", "demo", "test-under-load"} <= targets and "make test-under-load" in readme
    assert re.search(r"^make lab\s.*\nmake test\s", readme, re.MULTILINE)  # the two set-up commands, first
    (block,) = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    first, model, generate = block.strip().splitlines()
    assert first == "%load_ext kernel_ext"
    assert "library = build_library_model()" in model
    args = build_parser().parse_args(_split(generate.removeprefix("%besser ")))
    assert (args.command, args.model, " ".join(args.request)) == ("generate", "library", library_jwt.REQUEST)
    assert args.provider == "replay:library-jwt" and args.approve == "none"
    assert "`--approve` defaults to `none`" in readme


@pytest.mark.slow
@pytest.mark.timeout(3000)  # binder_env's postBuild runs inside it (its own bound: 1,800 s)
def test_postbuild_installs_and_enables_in_a_fresh_environment(binder_env, tmp_path):
    """``postBuild`` as repo2docker runs it, in a new virtual environment (``binder_env``, shared
    with test_install_paths, which runs notebook 01 there); then ``start`` in it."""
    started = binder_env.run(BINDER / "start", "python", "-c", PROBE, cwd=tmp_path, timeout=120)
    assert started.returncode == 0, started.stderr
    seen = json.loads(started.stdout)
    assert seen["provider"] == ["replay", "replay:library-jwt.cassette.jsonl"]
    assert Path(seen["env"]["BESSER_LLM_CASSETTE"]).is_relative_to(binder_env.prefix)  # the installed copy, not this tree
    assert seen["config"]["provider"]["configured"] is True


def test_the_installed_package_enables_the_extension_and_ships_the_recording(tmp_path):
    """What ``pip install .`` in postBuild installs: the wheel of this tree."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if built.returncode != 0 and "hatchling" in built.stderr and "No matching distribution" in built.stderr:
        pytest.skip(f"the build backend cannot be fetched here: {built.stderr.strip()[-300:]}")
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("besser_jupyter_agent-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        config = next(n for n in names if n.endswith("etc/jupyter/jupyter_server_config.d/kernel_ext.json"))
        assert json.loads(archive.read(config)) == {"ServerApp": {"jpserver_extensions": {"kernel_ext": True}}}
        assert "kernel_ext/scenarios/data/library-jwt.cassette.jsonl" in names
        assert "widgets/lesson.py" in names
