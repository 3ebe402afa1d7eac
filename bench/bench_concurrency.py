"""How one Jupyter server carries N runs at once: runs complete, run time, ``GET config`` latency.

For N in 1, 2, 4, 8, 16, 30, N demo runs (the Library model, the shipped ``library-jwt``
cassette through the replay provider, ``approve: all``) are started at once through REST on one
real Jupyter server with the extension (its own process, started once; the rounds follow each
other). Each run is followed over SSE to its ``done``; its time runs from its POST to its end,
queueing included. ``GET config`` is sampled every 100 ms throughout. Per N: runs completed,
p50 / p95 run time and p95 ``GET config`` latency, beside the N = 1 round as ratios. Targets:
every run completes, and ``GET config`` p95 <= 100 ms (issue 21).

The load itself is ``tests/run_load.py`` (the slow test's driver): it needs only a REST root and
a token, so a hub-wide bench can point it at each user's server.

Run: ``.venv/bin/python bench/bench_concurrency.py [--n 1,2,4] [--limit K]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from common import Figure, Target, emit, figure  # noqa: E402

ROUNDS = (1, 2, 4, 8, 16, 30)
CONFIG_P95_MS = 100.0


def table(rounds: list, base) -> list[str]:
    lines = [f"{'N':>3} {'completed':>9} {'p50 run':>8} {'p95 run':>8} {'x N=1':>6} {'config p95':>10} {'x N=1':>6} "
             f"{'config max':>10} {'wall':>7}"]
    for r in rounds:
        p50, p95, c95 = r.run_seconds(.5), r.run_seconds(.95), r.config_p(.95)
        lines.append(f"{r.n:>3} {f'{r.completed}/{r.n}':>9} {p50:>7.1f}s {p95:>7.1f}s {p95 / base.run_seconds(.95):>5.1f}x "
                     f"{c95:>8.1f}ms {c95 / base.config_p(.95):>5.1f}x {max(r.config_ms):>8.1f}ms {r.wall_s:>6.1f}s")
    return lines


def figures(rounds: list, base, limit: str) -> list[Figure]:
    found = []
    for r in rounds:
        lost = sum(run.host_lost for run in r.runs)
        note = f"{r.completed}/{r.n} completed, {lost} lost a host; runs at once: {limit}"
        found.append(figure(f"N={r.n}: runs completed", [r.completed], "runs", target=Target(">=", r.n), group="concurrency"))
        found.append(figure(f"N={r.n}: run time p95", [r.run_seconds(.95)], "s", baseline=("N=1", base.run_seconds(.95)),
                            group="concurrency", note=f"p50 {r.run_seconds(.5):.1f} s; {note}"))
        found.append(figure(f"N={r.n}: GET config p95", [r.config_p(.95)], "ms", baseline=("N=1", base.config_p(.95)),
                            target=Target("<=", CONFIG_P95_MS), group="concurrency",
                            note=f"{len(r.config_ms)} samples, max {max(r.config_ms):.0f} ms"))
    return found


async def bench(counts: tuple[int, ...], env: dict[str, str]) -> list:
    from run_load import load
    from server_process import start_server

    rounds = []
    with tempfile.TemporaryDirectory(prefix="besser-bench-load-") as workdir:
        server = start_server(Path(workdir), env=env)
        try:
            for n in counts:
                result = await load(server.agent_url, server.token, n)
                rounds.append(result)
                print(table(rounds, rounds[0])[-1], flush=True)
            peak = server.memory_kib()[1]
        finally:
            server.stop()
    print(f"server peak RSS {peak / 1024:.0f} MiB")
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
