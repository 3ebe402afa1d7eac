"""test_api on the Library backend: cold, warm, and 10 retained scenarios after a source change.

The 20-request Library scenario (``kernel_ext.validation.library_scenario``) runs against the
backend BESSER's FastAPI generator produces, through the real Executor and ``test_api``
(sandboxed warm host, fresh child, fresh SQLite database, redacted pydantic report). Beside
it, in the same run and on the same files:

- baseline ``bare process``: a fresh interpreter that imports the app and sends the 20
  requests over the in-process ASGI transport (no sandbox, no report): the cold floor;
- baseline ``bare requests``: only the 20 requests, timed right after that import (no warm-up);
- BESSER 8.4.1's own probe, ``besser.spec_driven_agent.validation.api_probe.probe_api_scenario``
  (a sandboxed one-off process per scenario), when it can be driven here.

Ours: ``cold, host started by the call`` (first scenario of a new run, whose host nothing
started before the call: the run takes the server's ready host, ``apphost.ready``, started after
an earlier host's first job, so the bench waits for it as a server in use would have it),
``cold, first host of a server`` (nothing ready: the whole start paid by the call), ``cold, host
pre-started`` (the host is started when Phase 1 ends, so the first scenario finds
it ready), ``warm replay`` (a retained scenario replayed by id), and the replay of 10 retained
scenarios after one source change (``replay_all``), against 10 BESSER probes in a row.

Run: ``.venv/bin/python bench/bench_test_api.py``
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from common import Target, emit, figure  # noqa: E402

ROUNDS = 3
WARM_REPS = 7
RETAINED = 10
COLD_TARGET = 1 / 3  # issue 32 item 4: cold >= 3x faster than BESSER's probe (its median over ours >= 3)

_BARE = r"""
import asyncio, json, os, shutil, sys, tempfile, time
started = time.perf_counter()
src, requests = sys.argv[1], json.loads(sys.stdin.read())
work = tempfile.mkdtemp()
app_dir = os.path.join(work, "app")
shutil.copytree(src, app_dir)
os.environ["DATABASE_URL"] = "sqlite:///" + os.path.join(work, "app.db")
os.chdir(app_dir); sys.path.insert(0, app_dir)
import httpx
sys.path.insert(0, sys.argv[2])
from kernel_ext.validation.references import Responses, resolve_string, resolve_value
imported = time.perf_counter()
import main_api
booted = time.perf_counter()
async def go():
    responses, statuses = Responses(), []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=main_api.app), base_url="http://t") as client:
        for i, r in enumerate(requests):
            path = resolve_string(r["path"], responses, i, in_path=True)
            kwargs = {"json": resolve_value(r["json"], responses, i)} if "json" in r else {}
            response = await client.request(r["method"], path, **kwargs)
            statuses.append(response.status_code)
            try:
                responses.add(response.json())
            except ValueError:
                responses.add(None)
    return statuses
statuses = asyncio.run(go())
done = time.perf_counter()
print(json.dumps({"requests_ms": (done - booted) * 1000, "boot_ms": (booted - imported) * 1000, "statuses": statuses}))
"""


def _fig(values: list[float]) -> str:
    return f"median {statistics.median(values):8.1f} ms  (min {min(values):7.1f} - max {max(values):7.1f})"


def _generate(root: Path) -> Path:
    from kernel_ext.generation import run_phase1
    from kernel_ext.model.examples import build_library_model

    run_phase1(build_library_model(), root, check=False)
    return root


def _bare_process(backend: Path, requests: list[dict]) -> tuple[float, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _BARE, str(backend), str(ROOT)], input=json.dumps(requests).encode(),
                          capture_output=True, timeout=120)
    wall = (time.perf_counter() - started) * 1000
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert all(s < 500 for s in out["statuses"]), out
    return wall, out["requests_ms"]


def _besser_probe():
    try:
        from besser.spec_driven_agent.validation.api_probe import probe_api_scenario
    except Exception as exc:  # noqa: BLE001 - reported, the bench goes on without it
        print(f"   (BESSER's probe cannot be imported here: {exc})")
        return None
    return probe_api_scenario


def _executor(project: Path, host, state):
    """The run's tools; with ``host`` None the tool finds the run's host itself (``hosting.app_host``)."""
    from kernel_ext.boundary import ApprovalPolicy, ExecutionPolicy, Executor, always_approve
    from kernel_ext.tools.base import ToolContext
    from kernel_ext.tools.registry import default_catalog
    from kernel_ext.workspace import Workspace

    services = {"workspace": Workspace(project), **({"app_host": host} if host is not None else {})}
    return Executor(default_catalog(), ToolContext(services=services, state=state),
                    policy=ExecutionPolicy.allowing(["test"]), approvals=ApprovalPolicy.without_approval_for("test"),
                    approver=always_approve)


def _timed_call(executor, arguments: dict) -> tuple[float, dict]:
    from kernel_ext.boundary import ToolCall

    started = time.perf_counter()
    result = executor.execute_sync(ToolCall("b", "test_api", arguments))
    wall = (time.perf_counter() - started) * 1000
    assert result.ok and result.data["passed"], result.observation
    return wall, result.data["report"]


def _ready_host(ready) -> None:
    """Have the server's ready host started and wait for it (a server in use has it)."""
    ready.refill(None)
    assert ready.wait(None, 120) is not None, "the ready app host did not start"


def _cold_from_ready(project: Path, requests: list[dict], run_id: str) -> tuple[float, str, dict]:
    """One cold call of a new run whose host is found by the tool (the ready one); (ms, its start note, timings)."""
    from kernel_ext.tools.base import RunState
    from kernel_ext.validation.hosting import close_app_hosts

    state = RunState(run_id=run_id)
    try:
        wall, report = _timed_call(_executor(project, None, state), {"scenario_id": "lib", "requests": requests})
    finally:
        close_app_hosts(run_id, state)
    return wall, next((n for n in report.get("notes", []) if n.startswith("app host")), ""), report["timings"]


def main() -> None:
    from kernel_ext.sandbox import tiers
    from kernel_ext.tools.api_test import replay_all
    from kernel_ext.tools.base import RunState
    from kernel_ext.validation.apphost.host import AppHost
    from kernel_ext.validation.apphost.ready import READY
    from kernel_ext.validation.library_scenario import library_requests

    choice = tiers.choose_tier("auto")
    if not choice.available:
        print(f"no sandbox tier available here ({choice.cause}); test_api cannot run")
        return
    scratch = Path(tempfile.mkdtemp(prefix="bench-test-api-"))
    try:
        project = _generate(scratch / "library")
        requests = library_requests()
        probe = _besser_probe()
        figures: dict[str, list[float]] = {k: [] for k in (
            "bare_process", "bare_requests", "besser_probe", "cold_nothing", "cold_ready", "cold_boot", "cold_requests",
            "cold_prestarted", "load", "warm", "warm_requests", "warm_boot_in_advance", "replay10_p2", "replay10_p1", "besser_probe_x10")}
        print(f"test_api, 20-request Library scenario; sandbox tier {choice.tier}; {ROUNDS} rounds")
        for round_no in range(ROUNDS):
            for _ in range(3):
                wall, req_ms = _bare_process(project / "backend", requests)
                figures["bare_process"].append(wall)
                figures["bare_requests"].append(req_ms)
            if probe is not None:
                for _ in range(3):
                    started = time.perf_counter()
                    report = probe(str(project), requests)
                    figures["besser_probe"].append((time.perf_counter() - started) * 1000)
                    assert report.get("status") == "passed", report
            # cold: a new run's host, found by the call: the server's ready one
            _ready_host(READY)
            figures["load"].append(os.getloadavg()[0])
            wall, note, timings = _cold_from_ready(project, requests, f"r{round_no}")
            assert note.startswith("app host taken ready"), note
            figures["cold_ready"].append(wall)
            figures["cold_boot"].append(timings.get("copy_ms", 0.0) + timings.get("boot_ms", 0.0))
            figures["cold_requests"].append(timings.get("requests_ms", 0.0))
            _ready_host(READY)  # the next ready host (started after that first job) does not overlap the figures below
            # cold, first host of a server: nothing ready, the call starts the host
            host = AppHost()
            try:
                executor = _executor(project, host, RunState(run_id=f"b{round_no}"))
                wall, _ = _timed_call(executor, {"scenario_id": "lib", "requests": requests})
                figures["cold_nothing"].append(wall)
            finally:
                host.close()
            # cold with the host pre-started (as a run does when Phase 1 ends), then warm replays
            host = AppHost()
            try:
                host.start_in_background().join()
                state = RunState(run_id=f"p{round_no}")
                executor = _executor(project, host, state)
                wall, _ = _timed_call(executor, {"scenario_id": "lib", "requests": requests})
                figures["cold_prestarted"].append(wall)
                for _ in range(WARM_REPS):
                    time.sleep(0.4)  # the time a model takes to answer: the prepared child gets ready
                    wall, report = _timed_call(executor, {"scenario_id": "lib"})
                    figures["warm"].append(wall)
                    figures["warm_requests"].append(report["timings"]["requests_ms"])
                    figures["warm_boot_in_advance"].append(report["timings"]["prepared_in_advance"])
                # 10 retained scenarios, then one source change, then replay_all
                for i in range(1, RETAINED):
                    _timed_call(executor, {"scenario_id": f"lib-{i}", "requests": requests})
                for parallel, key in ((2, "replay10_p2"), (1, "replay10_p1")):
                    router = project / "backend" / "routers" / "book.py"
                    router.write_text(router.read_text() + f"\n# source change {round_no}-{parallel}\n")
                    started = time.perf_counter()
                    reports = replay_all(executor.context, parallel=parallel)
                    figures[key].append((time.perf_counter() - started) * 1000)
                    assert len(reports) == RETAINED and all(r.passed for r in reports.values())
            finally:
                host.close()
            if probe is not None:
                started = time.perf_counter()
                for _ in range(RETAINED):
                    probe(str(project), requests)
                figures["besser_probe_x10"].append((time.perf_counter() - started) * 1000)
            print(f"   round {round_no + 1} done")
        _print(figures, probe is not None)
        emit(_figures(figures, probe is not None))
    finally:
        READY.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _figures(f: dict[str, list[float]], with_besser: bool) -> list:
    """The figures for bench/run_all.py; targets from F6: cold <= BESSER's probe (else 1.5 s), warm <= 300 ms."""
    bare = ("bare process", f["bare_process"])
    probe = ("probe_api_scenario", f["besser_probe"]) if with_besser else None
    cold_bound = statistics.median(f["besser_probe"]) if with_besser else 1500.0
    against = probe or bare
    ratio = statistics.median(f["cold_ready"]) / statistics.median(against[1])
    cold, boot, reqs = (statistics.median(f[k]) for k in ("cold_ready", "cold_boot", "cold_requests"))
    missed = (f"of the call's {cold:.0f} ms, the child forked from the ready host copied and imported the app in "
              f"{boot:.0f} ms and ran the 20 requests in {reqs:.0f} ms (bare: {statistics.median(f['bare_requests']):.0f} ms); "
              f"the other {cold - boot - reqs:.0f} ms are the call's path around them (read, stage, fork, report)")
    note = (f"{1 / ratio:.1f}x faster than {against[0]} (target >= {1 / COLD_TARGET:.0f}x); the host is the server's ready one "
            f"(started after an earlier host's first job); the first host of a server, with nothing ready, still pays the whole "
            f"start; 1-minute load average before the cold calls {statistics.median(f['load']):.1f} on {os.cpu_count()} cores")
    # issue 32 item 4's target is on BESSER's probe; where it cannot be driven, on the bare process (said in the note)
    cold_target = Target("<=", COLD_TARGET, on_besser=True) if with_besser else Target("<=", COLD_TARGET, on_ratio=True)
    out = [
        figure("test_api cold, host started by the call", f["cold_ready"], "ms", baseline=bare, besser=probe,
               target=cold_target, note=note, miss=missed),
        figure("test_api cold, first host of a server (nothing ready)", f["cold_nothing"], "ms", baseline=bare, besser=probe),
        figure("test_api cold, host pre-started", f["cold_prestarted"], "ms", baseline=bare, besser=probe,
               target=Target("<=", round(cold_bound, 1))),
        figure("test_api warm replay", f["warm"], "ms", baseline=("bare 20 requests after import", f["bare_requests"]),
               besser=probe, target=Target("<=", 300)),
        figure(f"replay_all {RETAINED} retained, 2 at a time", f["replay10_p2"], "ms",
               besser=(f"probe x{RETAINED}", f["besser_probe_x10"]) if with_besser else None),
    ]
    return out


def _print(f: dict[str, list[float]], with_besser: bool) -> None:
    med = {k: statistics.median(v) for k, v in f.items() if v}
    print("\n1. One scenario of 20 requests (wall time of the call)")
    print(f"   baseline: bare process (import + 20 requests, no sandbox)      {_fig(f['bare_process'])}")
    if with_besser:
        print(f"   baseline: BESSER 8.4.1 probe_api_scenario (sandboxed process)   {_fig(f['besser_probe'])}")
    print(f"   test_api cold, host started by the call (server's ready host)   {_fig(f['cold_ready'])}")
    print(f"   test_api cold, first host of a server (nothing ready)           {_fig(f['cold_nothing'])}")
    print(f"   1-minute load average before the cold calls: {statistics.median(f['load']):.1f} on {os.cpu_count()} cores")
    print(f"   test_api cold, host pre-started when Phase 1 ends               {_fig(f['cold_prestarted'])}")
    print(f"   test_api warm replay (retained scenario by id)                  {_fig(f['warm'])}")
    print(f"   baseline: bare 20 requests right after the import (no warm-up) {_fig(f['bare_requests'])}")
    print(f"     of which the 20 requests inside the sandboxed child           {_fig(f['warm_requests'])}")
    share = statistics.mean(f["warm_boot_in_advance"]) * 100
    print(f"     warm replays that found the app imported in advance: {share:.0f}%")
    ref = med["besser_probe"] if with_besser else med["bare_process"]
    name = "BESSER probe" if with_besser else "bare process"
    print(f"   ratios to {name}: cold {med['cold_ready'] / ref:.2f}x ({ref / med['cold_ready']:.1f}x faster), "
          f"first host of a server {med['cold_nothing'] / ref:.2f}x, cold pre-started {med['cold_prestarted'] / ref:.2f}x, "
          f"warm {med['warm'] / ref:.2f}x")
    print(f"\n2. {RETAINED} retained scenarios replayed after one source change")
    print(f"   test_api replay_all, 2 children at a time                       {_fig(f['replay10_p2'])}")
    print(f"   test_api replay_all, 1 child at a time                          {_fig(f['replay10_p1'])}")
    if with_besser:
        print(f"   baseline: BESSER probe x{RETAINED} in a row                           {_fig(f['besser_probe_x10'])}")
        print(f"   ratio (2 at a time) to BESSER x{RETAINED}: {med['replay10_p2'] / med['besser_probe_x10']:.2f}x")
    print(f"   per scenario (2 at a time): {med['replay10_p2'] / RETAINED:.1f} ms")


if __name__ == "__main__":
    main()
