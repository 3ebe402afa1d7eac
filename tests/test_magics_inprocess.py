"""The magics in an IPython shell (no kernel, no server): in-process runs, attach by replay,
listings, config, model resolution, short errors, the fallback when the server is gone; and a
whole scenario in a plain terminal IPython (9, and 8 beside ipykernel 6)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from kernel_flavours import FLAVOURS, flavour_env

from kernel_ext.magics import apitest
from kernel_ext.magics.commands import BesserMagics
from widgets.runview import RunView


@pytest.fixture
def ip(tmp_path, monkeypatch):
    """A shell with the extension freshly loaded, working in an empty folder, no server exported."""
    monkeypatch.chdir(tmp_path)
    for name in ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN", "BESSER_LLM_ENABLE_SHELL_TOOLS"):
        monkeypatch.delenv(name, raising=False)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kernel_ext")
    shell.run_line_magic("reload_ext", "kernel_ext")  # a fresh BesserMagics (no runs from other tests)
    yield shell
    shell.run_line_magic("unload_ext", "kernel_ext")


def run_dirs(tmp_path):
    folder = tmp_path / "besser_runs"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


async def approve_all(view: RunView, count: int = 2):
    for _ in range(count):
        (await view.wait_for_approval(timeout=20)).approve()
    return await view.wait(timeout=30)


def test_load_ext_registers_the_magics_and_imports_nothing_heavy(ip):
    assert "besser" in ip.magics_manager.magics["line"] and "test_api" in ip.magics_manager.magics["cell"]
    assert ip.run_line_magic("besser", "-h") is None
    assert ip.run_line_magic("besser", "scenario -h") is None


async def test_scenario_runs_in_process_and_returns_at_once(ip, tmp_path):
    view = ip.run_line_magic("besser", "scenario side-effects")
    assert isinstance(view, RunView) and not view.state.finished and "in-process" in view.note
    assert view.state.run_id and run_dirs(tmp_path) == [view.state.run_id]
    state = await approve_all(view)
    assert state.status == "completed" and [c.card.outcome for c in view.cards] == ["executed", "executed"]


async def test_generate_flags_narrow_the_run_switches(ip, tmp_path):
    import json

    line = 'generate example:library "Generate a FastAPI backend" --provider none --no-repair --no-import-smoke-check'
    view = ip.run_line_magic("besser", line)
    assert (await view.wait(timeout=240)).status == "completed"
    events = [json.loads(x) for x in (tmp_path / "besser_runs" / view.state.run_id / "events.jsonl").read_text().splitlines()]
    assert any(e["type"] == "finding" and "enable_import_smoke_check" in e["message"] for e in events)
    with pytest.raises(UsageError):
        ip.run_line_magic("besser", 'generate example:library "x" --repair-rounds many')


def test_a_bad_operator_setting_is_a_short_error(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("BESSER_EXTRA_ROOTS", "not/absolute")
    with pytest.raises(UsageError, match="configuration: extra fence root 'not/absolute'"):
        ip.run_line_magic("besser", 'generate example:library "Generate a FastAPI backend" --provider none')
    assert run_dirs(tmp_path) == []


async def test_attach_replays_a_finished_run_after_a_restart(ip, tmp_path):
    first = ip.run_line_magic("besser", "scenario side-effects --allow edit")
    await approve_all(first, count=1)
    await first.wait(timeout=30)
    ip.run_line_magic("reload_ext", "kernel_ext")  # as after a kernel restart: nothing in memory
    again = ip.run_line_magic("besser", f"attach {first.state.run_id}")
    assert again.state.status == first.state.status == "blocked"
    assert again.state.event_count == first.state.event_count
    assert [c.card.outcome for c in again.cards] == ["executed"]
    assert all(c.approve_button.disabled for c in again.cards)
    with pytest.raises(UsageError, match="RUN_NOT_FOUND"):
        ip.run_line_magic("besser", "attach 20250101-000000-abcdef")


async def test_runs_and_config(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
    view = ip.run_line_magic("besser", "scenario side-effects")
    table = ip.run_line_magic("besser", "runs")._repr_mimebundle_()["text/plain"]
    assert view.state.run_id in table and "in-process" in table
    await view.wait_for_approval(timeout=20)
    view.cancel_run()
    assert (await view.wait(timeout=10)).status == "cancelled"
    config = ip.run_line_magic("besser", "config")
    text = config._repr_mimebundle_()["text/plain"]
    assert config.config["mode"] == "in-process" and config.config["features"]["shell_tools_enabled"] is False
    assert "sk-test-0123456789" not in text


def test_short_errors(ip, tmp_path):
    ip.user_ns["number"] = 3
    cases = {
        "generate nope 'a backend'": "unknown model 'nope'",
        "generate number 'a backend'": r"'number' \(int\) is not a usable B-UML model",
        "scenario side-effects --allow shell": "INVALID_REQUEST",
        "scenario nope": "invalid choice",
        "generate 'unbalanced": "could not read the arguments",
        "show nope": "unknown model 'nope'",
        "frobnicate": "invalid choice",
    }
    for line, message in cases.items():
        with pytest.raises(UsageError, match=message):
            ip.run_line_magic("besser", line)
    assert run_dirs(tmp_path) == []


def test_show_draws_the_class_diagram(ip):
    from kernel_ext.model.examples import build_library_model

    ip.user_ns["library"] = build_library_model()
    bundle = ip.run_line_magic("besser", "show library")._repr_mimebundle_()
    assert "image/svg+xml" in bundle and "Book" in bundle["text/plain"]


@pytest.mark.slow
async def test_generate_starts_the_pipeline_in_process(ip, tmp_path):
    from kernel_ext.model.examples import build_library_model

    ip.user_ns["library"] = build_library_model()
    view = ip.run_line_magic("besser", "generate library 'A FastAPI backend' --provider none --approve all")
    assert isinstance(view, RunView) and view.state.run_id in run_dirs(tmp_path)
    await view.wait(timeout=600)


async def test_an_unreachable_server_falls_back_in_process(ip, tmp_path, monkeypatch):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("BESSER_AGENT_URL", f"http://127.0.0.1:{port}/besser-agent/")
    monkeypatch.setenv("BESSER_AGENT_TOKEN", "capability-token-for-nothing")
    view = ip.run_line_magic("besser", "scenario side-effects")
    assert "did not answer" in view.note and "running in-process" in view.note
    assert "capability-token-for-nothing" not in view.note + view.to_text()
    assert run_dirs(tmp_path) == [view.state.run_id]
    assert (await approve_all(view)).status == "completed"


def test_test_api_cells_are_validated():
    assert apitest.parse_cell('[{"method": "GET", "path": "/books"}]') == {"requests": [{"method": "GET", "path": "/books"}]}
    assert apitest.parse_cell("name: list\nrequests:\n  - method: GET\n    path: /books\n")["name"] == "list"
    for bad in ("", "[]", "{not: [valid", '[{"path": "/x"}]', "just words"):
        with pytest.raises(ValueError):
            apitest.parse_cell(bad)


def test_magics_work_without_a_shell_namespace_model():
    magics = BesserMagics(None)
    with pytest.raises(UsageError, match="unknown model"):
        magics._model_source("missing")


async def test_a_run_cancelled_before_its_first_step_still_ends(ip):
    view = ip.run_line_magic("besser", "scenario side-effects")
    view.cancel_run()  # same cell: the run's task has not started yet
    state = await view.wait(timeout=10)
    assert state.status == "cancelled" and state.errors[-1]["code"] == "CANCELLED"


IPYTHON_MAJOR = {"ipykernel7": 9, "ipykernel6": 8}  # the IPython each kernel flavour comes with
PLAIN_SCRIPT = """\
import IPython
print("ipython", IPython.version_info[0])
%load_ext kernel_ext
view = %besser scenario side-effects
for _ in range(2):
    card = await view.wait_for_approval(timeout=60)
    card.approve()
state = await view.wait(timeout=60)
print("status:", state.status, [c.card.outcome for c in view.cards])
"""


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_plain_terminal_ipython_runs_a_scenario_in_process(tmp_path, flavour):
    """``ipython script.ipy`` (no kernel, no server, no loop between cells), on IPython 9 and 8."""
    script = tmp_path / "run.ipy"
    script.write_text(PLAIN_SCRIPT)
    env = flavour_env(flavour)
    for name in ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "IPython", "--no-banner", "--colors=NoColor", str(script)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"ipython {IPYTHON_MAJOR[flavour]}" in done.stdout
    assert "status: completed ['executed', 'executed']" in done.stdout, done.stdout[-2000:]
    assert len(run_dirs(tmp_path)) == 1 and "Traceback" not in done.stdout + done.stderr
