"""The three-phase run end to end: the shipped JWT cassette, no provider, frontend intent."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys

import pytest

from kernel_ext.providers.replay import ReplayProvider
from kernel_ext.scenarios import library_jwt
from pipeline_helpers import events_of, run_pipeline

pytestmark = pytest.mark.slow


def test_jwt_cassette_end_to_end(tmp_path):
    run, done = run_pipeline(tmp_path, library_jwt.REQUEST, provider=ReplayProvider(library_jwt.CASSETTE, strict=False))
    assert done.status == "completed", done.summary
    started = events_of(run, "run_started")[0]
    assert started.provider_kind == "replay"  # never passed off as a live model
    phases = [(e.phase, e.status) for e in events_of(run, "phase")]
    assert phases == [(p, s) for p in ("select", "generate", "gap", "customize", "validate") for s in ("started", "done")]
    # the deliberate SECRET_KEY bug is caught by Phase 3 as an F821-class blocker ...
    blockers = [f for f in events_of(run, "finding") if f.severity == "blocker"]
    assert any("SECRET_KEY" in f.message for f in blockers)
    # ... and the repair round fixes it and proves the login flow with the bearer token
    results = {e.call_id: e for e in events_of(run, "tool_result")}
    flow = [e for e in results.values() if e.name == "test_api"]
    assert flow and flow[-1].ok and "passed" in flow[-1].summary
    app = run.context.layout.app_dir / "backend"
    assert "from deps import SECRET_KEY" in (app / "auth.py").read_text()
    assert (app / "Dockerfile").exists() and "app.include_router(auth_router)" in (app / "main_api.py").read_text()
    # the done event carries the authorship split and the verification report
    assert set(done.authorship["llm_authored"]) == {"backend/auth.py", "backend/deps.py", "backend/Dockerfile"}
    assert "backend/main_api.py" in done.authorship["generator_llm_modified"]
    assert done.verification["failing_scenarios"] == [] and done.blockers == []
    statuses = {t["id"]: t["status"] for t in done.verification["tasks"]}
    assert statuses == {"T1": "implemented", "T2": "implemented", "T3": "implemented"}
    recipe = json.loads(run.context.layout.recipe_path.read_text())
    assert recipe["generator"] == "fastapi_backend" and "backend/auth.py" in recipe["files"]
    assert not any(path.startswith(".besser") for path in recipe["files"])
    lines = run.context.layout.events_path.read_text().splitlines()
    assert json.loads(lines[-1])["type"] == "done" and len(lines) == len(run.events.events)


def test_no_provider_runs_phase1_and_phase3_for_real(tmp_path):
    run, done = run_pipeline(tmp_path, "Generate a FastAPI backend for this model")
    by_phase = {(e.phase, e.status): e for e in events_of(run, "phase")}
    assert ("gap", "skipped") in by_phase and "no LLM provider" in by_phase[("gap", "skipped")].message
    assert ("customize", "skipped") in by_phase
    assert by_phase[("generate", "done")].details["files"] > 5
    assert (run.context.layout.app_dir / "backend" / "main_api.py").exists()
    assert done.status == "completed"
    assert done.authorship["llm_authored"] == [] and done.authorship["generator_llm_modified"] == []
    started = events_of(run, "run_started")[0]
    assert started.sandbox_tier in ("bwrap", "landlock") and started.provider_kind == "none"


def test_a_needed_frontend_that_never_came_is_a_blocker(tmp_path):
    run, done = run_pipeline(tmp_path, "Build a web app for the library")
    assert done.status == "blocked"
    assert any("frontend" in b for b in done.blockers)
    select = [e for e in events_of(run, "phase") if e.phase == "select" and e.status == "done"][0]
    assert select.details["frontend"] is True


def test_cli_generate_exits_non_zero_when_blockers_remain(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_ext", "generate", "example:library", "Build a web app for the library",
         "--out", str(tmp_path / "run"), "--provider", "none"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[validate]" in proc.stdout and "blocker:" in proc.stdout
    assert (tmp_path / "run" / "events.jsonl").exists() and (tmp_path / "run" / "run.json").exists()


def test_an_unknown_explicit_target_is_refused_by_name(tmp_path):
    run, done = run_pipeline(tmp_path, "anything", target="fastapi")
    assert done.status == "failed"
    error = events_of(run, "error")[0]
    assert error.code == "INVALID_ARGUMENT" and "fastapi" in error.message
    assert not any((run.context.layout.app_dir).iterdir())  # nothing was generated


def test_with_shell_tools_the_probe_boots_the_backend_in_the_session(tmp_path):
    """The seed's probe: hidden (.besser_probe.py), not generator output, and routes/req boot the
    backend again when the session was restarted (``exit`` ends the shell and its processes)."""
    from pipeline_helpers import Turn, call

    with socket.socket() as free:  # the run's shell shares the host's loopback: take a port nobody holds
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    steps = [f"python .besser_probe.py up --port {port}", "exit", "python .besser_probe.py routes", "exit",
             "python .besser_probe.py req GET /book/ -H 'X-Api-Key: s3cr3t-value'", "python .besser_probe.py down"]
    turns = [Turn("", (call("submit_tasks", {"tasks": ["check the backend answers"]}),))]
    turns += [Turn("", (call("run_command", {"command": step}),)) for step in steps]
    turns += [Turn("", (call("task_list", {"action": "blocked", "id": "T1", "reason": "verified by hand"}),)), Turn("done")] * 4
    run, done = run_pipeline(tmp_path, "Generate a FastAPI backend", turns, allow_shell_tools=True)
    assert run.events.events[0].shell_tools_enabled
    results = [e for e in events_of(run, "tool_result") if e.name == "run_command"]
    up, _, routes, _, req, down = results
    assert [r.ok for r in (up, routes, req, down)] == [True] * 4, [r.summary for r in results]
    assert "starting it" in routes.summary and "/author/" in routes.summary  # the restarted session's app, booted again
    printed = req.summary.split("\n", 1)[1]  # what the probe printed, after the echoed command line
    assert "starting it" in printed and "GET /book/ -> 200" in printed
    assert "s3cr3t-value" not in printed and "<12 chars>" in printed
    assert "stopped pid" in down.summary
    app = run.context.layout.app_dir
    assert (app / ".besser_probe.py").exists() and not (app / "probe.py").exists()
    assert not any(".besser" in path for paths in done.authorship.values() for path in paths)
    recipe = json.loads(run.context.layout.recipe_path.read_text())
    assert not any(path.startswith(".besser") for path in recipe["files"])


def test_spilled_output_is_readable_where_the_result_says_and_internal_folders_are_not_the_app(tmp_path):
    """A cut run_command result names its spill file and id: read_file, search_in_files and
    sh_detail/sh_logs reach them; writing there is refused (nothing changes); the spill folder
    and the probe stay out of the authorship split, the recipe's files, snapshots and the archive."""
    from pipeline_helpers import Turn, call

    def look(request):
        said = re.findall(r"full output: (\S+) \(search or read it for the omitted part, or sh_detail (cmd-[0-9a-f-]+)\)", repr(request.messages))
        log, spilled = said[-1]  # what the model was told: the spill file and the id
        return Turn("", (
            call("read_file", {"path": log}),
            call("search_in_files", {"pattern": "^29999$", "path": ".besser_command_output"}),
            call("sh_detail", {"id": spilled, "match": "^29999$"}),
            call("sh_logs", {"id": spilled, "stream": "stderr"}),
            call("write_file", {"path": log, "content": "overwritten\n"}),
            call("delete_file", {"path": log}),
        ))

    turns = [Turn("", (call("submit_tasks", {"tasks": ["count to 30000"]}),)),
             Turn("", (call("run_command", {"command": "seq 1 30000"}),)), look]
    turns += [Turn("", (call("task_list", {"action": "blocked", "id": "T1", "reason": "counted"}),)), Turn("done")] * 4
    run, done = run_pipeline(tmp_path, "Generate a FastAPI backend", turns, allow_shell_tools=True)
    results = {e.name: e for e in events_of(run, "tool_result")}
    spilled = results["run_command"].data["id"]
    log = run.context.layout.app_dir / ".besser_command_output" / f"{spilled}.log"
    assert results["run_command"].data["full_output_path"] == f".besser_command_output/{spilled}.log"
    assert results["read_file"].ok and "$ seq 1 30000" in results["read_file"].summary, results["read_file"].summary
    assert results["search_in_files"].ok and "29999" in results["search_in_files"].summary, results["search_in_files"].summary
    assert results["sh_detail"].ok and "29999" in results["sh_detail"].summary, results["sh_detail"].summary
    assert results["sh_logs"].ok, results["sh_logs"].summary
    for refused in ("write_file", "delete_file"):
        assert not results[refused].ok and results[refused].error_code == "protected_path", results[refused]
    assert log.read_text().startswith("$ seq 1 30000\n") and "29999\n" in log.read_text()  # unchanged
    assert not any(".besser" in path for paths in done.authorship.values() for path in paths), done.authorship
    recipe = json.loads(run.context.layout.recipe_path.read_text())
    assert not any(path.startswith(".besser") for path in recipe["files"])
    snapshots = run.context.layout.snapshots_dir
    assert snapshots.is_dir() and not any(p.name.startswith(".besser") for p in snapshots.rglob("*"))
    import io
    import zipfile

    from kernel_ext.server.archive import write_archive

    buffer = io.BytesIO()
    write_archive(run.context.layout.run_dir, buffer)
    names = zipfile.ZipFile(buffer).namelist()
    assert "run/app/backend/main_api.py" in names and not any(".besser" in name for name in names), names


def test_toolchain_validation_blocks_unresolvable_requirements(tmp_path):
    from pipeline_helpers import Turn, call

    turns = [
        Turn("", (call("submit_tasks", {"tasks": ["pin a dependency"]}),)),
        Turn("", (call("read_file", {"path": "backend/requirements.txt"}),)),
        Turn("", (call("write_file", {"path": "backend/requirements.txt", "content": "fastapi\nbesser-no-such-package-zz==1.0\n"}),)),
        Turn("", (call("task_list", {"action": "done", "id": "T1", "evidence": [
            {"id": "T1", "path": "backend/requirements.txt", "quote": "besser-no-such-package-zz==1.0"}]}),)),
        Turn("done"),
    ] + [Turn("cannot fix")] * 12
    run, done = run_pipeline(tmp_path, "Generate a FastAPI backend", turns, enable_toolchain_validation=True)
    assert done.status == "blocked"
    toolchain = [f for f in events_of(run, "finding") if f.source == "toolchain"]
    assert toolchain and "besser-no-such-package-zz" in toolchain[0].message
    assert toolchain[0].path == "backend/requirements.txt"
