"""Modify runs: continue from a run's files and tasks; a changed model regenerates and says why."""

from __future__ import annotations

import asyncio

import pytest

from kernel_ext.model.jsonform import model_from_dict, model_to_dict
from kernel_ext.model.loading import load_model
from kernel_ext.pipeline.generation import generate
from kernel_ext.providers.replay import ReplayProvider
from kernel_ext.scenarios import library_jwt

pytestmark = pytest.mark.slow


def run(model, request, run_dir, **options):
    async def go():
        started = generate(model, request, run_dir=run_dir, approve="all", **options)
        return started, await asyncio.wait_for(started.wait(), 240)

    return asyncio.run(go())


def test_same_model_continues_from_files_and_tasks(tmp_path):
    runs = tmp_path / "runs"
    base, done = run("example:library", library_jwt.REQUEST, runs / "base", provider=ReplayProvider(library_jwt.CASSETTE, strict=False))
    assert done.status == "completed"
    follow, done2 = run("example:library", "add pagination to the app", runs / "next", provider="none", base_run_id="base")
    phases = {(e.phase, e.status): e for e in follow.events.events if e.type == "phase"}
    assert ("generate", "skipped") in phases and "continuing from run base" in phases[("generate", "skipped")].message
    app = follow.context.layout.app_dir / "backend"
    assert "from deps import SECRET_KEY" in (app / "auth.py").read_text()  # the base run's work is there
    assert "backend/auth.py" in done2.authorship["llm_authored"]  # and still attributed to the LLM
    statuses = [t["status"] for t in done2.verification["tasks"]]
    assert statuses == ["implemented"] * 3
    select = phases[("select", "done")]
    assert select.details["frontend"] is False  # "the app" names the existing project here


def test_changed_model_regenerates_and_names_the_change(tmp_path):
    runs = tmp_path / "runs"
    run("example:library", "Generate a FastAPI backend", runs / "base", provider="none")
    form = model_to_dict(load_model("example:library"))
    form["classes"].append({"name": "Loan", "attributes": [{"name": "days", "type": "int", "multiplicity": "1..1"}], "methods": []})
    changed = model_from_dict(form)
    follow, done = run(changed, "Generate a FastAPI backend", runs / "next", provider="none", base_run_id="base")
    phases = {(e.phase, e.status) for e in follow.events.events if e.type == "phase"}
    assert ("generate", "done") in phases
    assert (follow.context.layout.app_dir / "backend" / "routers" / "loan.py").exists()
    texts = [t["text"] for t in done.verification["tasks"]]
    assert any("new class Loan" in t for t in texts)


def test_unknown_base_run_is_a_named_failure(tmp_path):
    follow, done = run("example:library", "x", tmp_path / "runs" / "next", provider="none", base_run_id="missing-run")
    assert done.status == "failed"
    error = [e for e in follow.events.events if e.type == "error"][0]
    assert error.code == "NOT_FOUND"


def test_a_continued_run_has_its_own_probe_and_none_of_the_base_runs_internal_files(tmp_path):
    """The copy skips a run's own files (spill, probe state); with shell tools on the probe is written afresh."""
    runs = tmp_path / "runs"
    base, _ = run("example:library", "Generate a FastAPI backend", runs / "base", provider="none", allow_shell_tools=True)
    (base.context.layout.app_dir / ".besser_command_output").mkdir()
    (base.context.layout.app_dir / ".besser_command_output" / "old.log").write_text("the base run's output\n")
    (base.context.layout.app_dir / ".besser_probe").mkdir()
    (base.context.layout.app_dir / ".besser_probe" / "pid").write_text("1\n")
    follow, done = run("example:library", "add pagination to the app", runs / "next", provider="none", base_run_id="base",
                       allow_shell_tools=True)
    app = follow.context.layout.app_dir
    assert (app / ".besser_probe.py").read_bytes() == (base.context.layout.app_dir / ".besser_probe.py").read_bytes()
    assert not (app / ".besser_command_output").exists() and not (app / ".besser_probe").exists()
    assert not any(".besser" in path for paths in done.authorship.values() for path in paths)
