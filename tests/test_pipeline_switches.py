"""The run switches the seeds name, through the real pipeline (an authored script stands in for the LLM):
Phase 3 repair on/off and its round count (within the operator's cap), the runtime probes
(``enable_import_smoke_check``), the shell runbook (``BESSER_LLM_SHELL_RUNBOOK=0``) and the
operator's extra fence roots (``BESSER_EXTRA_ROOTS``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pipeline_helpers import Turn, call, events_of, run_pipeline

from kernel_ext.pipeline.prompts import RUNBOOK
from kernel_ext.providers.scripted import Script, ScriptedProvider

pytestmark = pytest.mark.slow

BROKEN = "def total():\n    return undefined_total_name\n"


def broken_script(extra_done: int = 12) -> list[Turn]:
    """Phase 2 writes a file with an F821 blocker and gives up on its task; every later turn only answers."""
    return [
        Turn("", (call("submit_tasks", {"tasks": ["add a totals helper"]}),)),
        Turn("", (call("write_file", {"path": "backend/totals.py", "content": BROKEN}),)),
        Turn("", (call("task_list", {"action": "blocked", "id": "T1", "reason": "left for later"}),)),
        *[Turn("nothing to change")] * extra_done,
    ]


def validate_done(run):
    return next(e for e in events_of(run, "phase") if e.phase == "validate" and e.status == "done")


def test_repair_off_validates_without_repair_rounds(tmp_path):
    run, done = run_pipeline(tmp_path, "Generate a FastAPI backend", broken_script(), auto_fix=False)
    phase = validate_done(run)
    assert phase.details["rounds"] == 0 and "repair is off" in phase.message
    assert any("undefined_total_name" in b for b in done.blockers)
    assert "undefined_total_name" in (run.context.layout.app_dir / "backend" / "totals.py").read_text()


def test_repair_rounds_from_the_request_within_the_operators_cap(tmp_path, monkeypatch):
    run, _ = run_pipeline(tmp_path / "one", "Generate a FastAPI backend", broken_script(), repair_rounds=1)
    assert validate_done(run).details["rounds"] == 1 and "round budget (1) spent" in validate_done(run).message
    monkeypatch.setenv("BESSER_LLM_MAX_REPAIR_ROUNDS", "1")
    capped, _ = run_pipeline(tmp_path / "capped", "Generate a FastAPI backend", broken_script(), repair_rounds=3)
    assert validate_done(capped).details["rounds"] == 1
    monkeypatch.setenv("BESSER_LLM_ENABLE_AUTO_FIX", "0")
    off, _ = run_pipeline(tmp_path / "off", "Generate a FastAPI backend", broken_script(), auto_fix=True)
    assert validate_done(off).details["rounds"] == 0  # a request cannot turn on what the operator turned off


def runtime_skipped(run) -> bool:
    return any(e.source == "probe" and "enable_import_smoke_check" in e.message for e in events_of(run, "finding"))


def test_import_smoke_check_is_a_request_and_an_operator_switch(tmp_path, monkeypatch):
    run, _ = run_pipeline(tmp_path / "req", "Generate a FastAPI backend", enable_import_smoke_check=False)
    assert runtime_skipped(run)
    run, _ = run_pipeline(tmp_path / "default", "Generate a FastAPI backend")
    assert not runtime_skipped(run)
    monkeypatch.setenv("BESSER_LLM_ENABLE_IMPORT_SMOKE_CHECK", "0")
    run, _ = run_pipeline(tmp_path / "op", "Generate a FastAPI backend", enable_import_smoke_check=True)
    assert runtime_skipped(run)


class Recording(ScriptedProvider):
    """The authored script, keeping each request's system prompt (what the model would be told)."""

    def __init__(self, turns):
        super().__init__(Script.of("switches", turns))
        self.systems: list[str] = []

    async def _events(self, request, cancel, budget=None):
        self.systems.append(request.system)
        async for event in super()._events(request, cancel, budget):
            yield event


@pytest.mark.parametrize("runbook", ["1", "0"])
def test_shell_runbook_follows_the_operator(tmp_path, monkeypatch, runbook):
    monkeypatch.setenv("BESSER_LLM_SHELL_RUNBOOK", runbook)
    provider = Recording([Turn("", (call("submit_tasks", {"tasks": ["look around"]}),)),
                          Turn("", (call("task_list", {"action": "blocked", "id": "T1", "reason": "nothing to do"}),)),
                          *[Turn("done")] * 8])
    run_pipeline(tmp_path, "Generate a FastAPI backend", provider=provider, allow_shell_tools=True, enable_import_smoke_check=False)
    customise = [s for s in provider.systems if "You customise an application" in s]
    assert customise, provider.systems[:1]
    assert all((RUNBOOK in s) == (runbook == "1") for s in customise)


@pytest.mark.parametrize("configured", [True, False])
def test_extra_fence_roots_come_from_the_operator(tmp_path, monkeypatch, configured):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "style.md").write_text("use snake_case\n")
    if configured:
        monkeypatch.setenv("BESSER_EXTRA_ROOTS", str(shared))
    turns = [Turn("", (call("submit_tasks", {"tasks": ["read the style guide"]}),)),
             Turn("", (call("read_file", {"path": str(shared / "style.md")}),)),
             Turn("", (call("write_file", {"path": str(shared / "notes.md"), "content": "seen\n"}),)),
             Turn("", (call("task_list", {"action": "blocked", "id": "T1", "reason": "a note is enough"}),)),
             *[Turn("done")] * 8]
    run, _ = run_pipeline(tmp_path / "run", "Generate a FastAPI backend", turns, enable_import_smoke_check=False)
    results = {e.name: e for e in events_of(run, "tool_result")}
    if configured:
        assert results["read_file"].ok and "snake_case" in results["read_file"].summary
        assert results["write_file"].ok and (shared / "notes.md").read_text() == "seen\n"
    else:
        assert not results["read_file"].ok and "outside" in results["read_file"].summary.lower()
        assert not results["write_file"].ok and sorted(p.name for p in shared.iterdir()) == ["style.md"]


def test_a_bad_extra_root_is_a_named_configuration_error(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "BESSER_EXTRA_ROOTS": "relative/folder"}
    proc = subprocess.run([sys.executable, "-m", "kernel_ext", "tool", "--workspace", str(tmp_path), "list_files", "{}"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "extra fence root 'relative/folder'" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_generate_flags_turn_repair_and_the_runtime_probes_off(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_ext", "generate", "example:library", "Generate a FastAPI backend", "--out", str(tmp_path / "run"),
         "--provider", "none", "--no-repair", "--no-import-smoke-check"],
        capture_output=True, text=True, timeout=300,
    )
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert any(e["type"] == "finding" and "enable_import_smoke_check" in e["message"] for e in events), proc.stdout
    validate = next(e for e in events if e["type"] == "phase" and e["phase"] == "validate" and e["status"] == "done")
    assert validate["details"]["rounds"] == 0
