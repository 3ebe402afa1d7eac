"""How one Jupyter server carries N runs at once: runs complete, run time, ``GET config`` latency.

For N in 1, 2, 4, 8, 16, 30, N demo runs (the Library model, the shipped ``library-jwt``
cassette through the replay provider, ``approve: all``) are started at once through REST on one
real Jupyter server with the extension (its own process, started once; the rounds follow each
other). Each run is followed over SSE to its ``done``; its time runs from its POST to its end,
queueing included. ``GET config`` is sampled every 100 ms throughout. Per N: runs completed,
p50 / p95 run time and p95 ``GET config`` latency, beside the N = 1 round as ratios. Targets:
every run completes, ``GET config`` p95 <= 100 ms (issue 21), and at N = 30 p95 <= 60 s (issue 32).

Beside the times, per round: CPU seconds per run of the server and everything it started
(``treecpu``: a cpuacct group where the bench may make one), so the floor is visible (N runs x CPU
per run / cores), and where a run's time went, from its own events: waiting in the admission
queue (``queued`` position 0's ``waited_s``) and each phase's ``duration_s`` (generate, with how
many were Phase 1 cache hits; customize; validate).

The load itself is ``tests/run_load.py`` (the slow test's driver): it needs only a REST root and
a token, so a hub-wide bench can point it at each user's server.

Run: ``.venv/bin/python bench/bench_concurrency.py [--n 1,2,4] [--limit K]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from common import Figure, Target, emit, figure  # noqa: E402
from treecpu import TreeCPU  # noqa: E402

ROUNDS = (1, 2, 4, 8, 16, 30)
CPU_HOW = ["CPU"]  # how the CPU figure was measured (set once the server is up)
CONFIG_P95_MS = 100.0


RUN_P95_TARGET_S = {30: 60.0}  # issue 32: a class of 30 on one 2-core server
# Measured 2026-12 (H4), why N=30 misses 60 s: the tree's CPU is 2.7 s per run (cpuacct), so 30 runs
# on 2 cores have a floor of ~40 s and 60 s asks for two-thirds of the cores kept busy; the last
# quiet-machine figure was 69.5 s (CI 60.7 s). Per run at N=1-2, Phase 3 (validate) is 14-25 s of
# 22-28 s (load 14), generate a Phase 1 cache hit (0.4 s), customize 0.4-1.2 s: the CPU is the app
# host's and probe children's import of FastAPI, SQLAlchemy and pydantic (issue 32 item 4 chose a ready
# host started earlier, apphost.ready: it takes that import off a call's wait, not off the CPU).
# Admitting more runs at once does not help on a busy machine: at load 17-20, 30 runs took p95 585 s
# at the default 2 places and 602 s at 4 (same hour).
N30_MISS = ("measured: CPU 2.7 s per run (floor ~40 s on 2 cores); Phase 3's app-host imports are most of a "
            "run; 4 places instead of 2 gave no gain on a busy machine (585 vs 602 s at load 17-20); this round's "
            "CPU per run, floor and phase means are in its note and the 'CPU seconds per run' row")
# GET config has met its 100 ms p95 in every recorded round (p95 24-38 ms for N = 1-30 on 2026-12-01; 27-35 ms
# with 300 queued runs cancelled at once, red team 2), so no miss of it has been measured; what to measure if it misses:
CONFIG_MISS = ("no measured reason yet (every recorded round met it): measure the server loop's lag during the round "
               "(tests' LoopLag beside an idle baseline) and which handler or run step held the loop, e.g. with "
               "asyncio debug's slow-callback log")


def table(rounds: list, base) -> list[str]:
    lines = [f"{'N':>3} {'completed':>9} {'p50 run':>8} {'p95 run':>8} {'x N=1':>6} {'config p95':>10} {'x N=1':>6} "
             f"{'config max':>10} {'wall':>7} {'CPU/run':>8} {'floor':>7}  "
             "mean per run: queued, generate (cache hits), customize, validate"]
    for r in rounds:
        p50, p95, c95 = r.run_seconds(.5), r.run_seconds(.95), r.config_p(.95)
        w = r.alongside
        lines.append(f"{r.n:>3} {f'{r.completed}/{r.n}':>9} {p50:>7.1f}s {p95:>7.1f}s {p95 / base.run_seconds(.95):>5.1f}x "
                     f"{c95:>8.1f}ms {c95 / base.config_p(.95):>5.1f}x {max(r.config_ms):>8.1f}ms {r.wall_s:>6.1f}s "
                     f"{w.cpu_per_run:>7.2f}s {w.floor_s:>6.1f}s  {w.queued:.1f}s, {w.generate:.1f}s ({w.cache_hits}/{r.n}), "
                     f"{w.customize:.1f}s, {w.validate:.1f}s")
    return lines


@dataclass
class Where:
    """Where one round's runs spent their time (means per run, from their logs) and its CPU."""

    cpu_per_run: float
    floor_s: float  # n x cpu_per_run / cores: the round's wall time if the cores never waited
    queued: float
    generate: float
    customize: float
    validate: float
    cache_hits: int


def where(runs: list, cpu_seconds: float, cores: int) -> Where:
    waits: dict[str, list[float]] = {"queued": [], "generate": [], "customize": [], "validate": []}
    hits = 0
    for run in runs:
        for line in (Path(run.run_dir) / "events.jsonl").read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event["type"] == "queued" and event.get("position") == 0:
                waits["queued"].append(event.get("waited_s") or 0.0)
            elif event["type"] == "phase" and event["status"] == "done" and event["phase"] in waits:
                waits[event["phase"]].append(event.get("duration_s") or 0.0)
                hits += event["phase"] == "generate" and "reused from cache" in event.get("message", "")
    n = max(len(runs), 1)
    mean = {k: sum(v) / n for k, v in waits.items()}  # a run that never queued waited 0
    return Where(cpu_seconds / n, cpu_seconds / cores, mean["queued"], mean["generate"], mean["customize"], mean["validate"], hits)


def figures(rounds: list, base, limit: str) -> list[Figure]:
    found = []
    for r in rounds:
        lost = sum(run.host_lost for run in r.runs)
        note = f"{r.completed}/{r.n} completed, {lost} lost a host; runs at once: {limit}"
        found.append(figure(f"N={r.n}: runs completed", [r.completed], "runs", target=Target(">=", r.n), group="concurrency"))
        goal = RUN_P95_TARGET_S.get(r.n)
        w = r.alongside
        found.append(figure(f"N={r.n}: run time p95", [r.run_seconds(.95)], "s", baseline=("N=1", base.run_seconds(.95)),
                            target=Target("<=", goal) if goal else None, group="concurrency", miss=N30_MISS,
                            note=f"p50 {r.run_seconds(.5):.1f} s; CPU floor {w.floor_s:.1f} s; mean per run: queued {w.queued:.1f} s, "
                                 f"generate {w.generate:.1f} s ({w.cache_hits} cache hits), customize {w.customize:.1f} s, "
                                 f"validate {w.validate:.1f} s; {note}"))
        found.append(figure(f"N={r.n}: CPU seconds per run", [w.cpu_per_run], "s", group="concurrency",
                            note=f"{CPU_HOW[0]}; floor for the round {w.floor_s:.1f} s on {len(os.sched_getaffinity(0))} cores"))
        found.append(figure(f"N={r.n}: GET config p95", [r.config_p(.95)], "ms", baseline=("N=1", base.config_p(.95)),
                            target=Target("<=", CONFIG_P95_MS), group="concurrency", miss=CONFIG_MISS,
                            note=f"{len(r.config_ms)} samples, max {max(r.config_ms):.0f} ms"))
    return found


async def bench(counts: tuple[int, ...], env: dict[str, str]) -> list:
    from run_load import load
    from server_process import start_server

    rounds = []
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="besser-bench-load-") as workdir:
        server = start_server(Path(workdir), env=env)
        cpu = TreeCPU(server.pid)
        CPU_HOW[:] = [cpu.how]
        try:
            for n in counts:
                before = cpu.seconds()
                result = await load(server.agent_url, server.token, n)
                result.alongside = where(result.runs, cpu.seconds() - before, cores)
                rounds.append(result)
                print(table(rounds, rounds[0])[-1], flush=True)
            peak = server.memory_kib()[1]
        finally:
            server.stop()
            cpu.close()
    print(f"server peak RSS {peak / 1024:.0f} MiB; CPU measured as: {CPU_HOW[0]}")
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default=",".join(map(str, ROUNDS)), help="the rounds' run counts (the first is the baseline)")
    parser.add_argument("--limit", type=int, default=None, help="BESSER_MAX_CONCURRENT_RUNS for the server (default: its own)")
    args = parser.parse_args()
    counts = tuple(int(n) for n in args.n.split(","))
    env = {"BESSER_MAX_CONCURRENT_RUNS": str(args.limit)} if args.limit else {}
    from kernel_ext.hosting.options import default_run_limit

    limit = str(args.limit or os.environ.get("BESSER_MAX_CONCURRENT_RUNS") or f"{default_run_limit()} (machine default)")
    print(f"N demo runs at once on one server (replay, approve all); runs at once: {limit}")
    print(table([], None)[0], flush=True)
    rounds = asyncio.run(bench(counts, env))
    print("\n".join(table(rounds, rounds[0])))
    emit(figures(rounds, rounds[0], limit))


if __name__ == "__main__":
    main()
