"""``GET runs`` with 1,000 runs on disk: the listing's latency through the run index.

1,000 finished runs (each a log of a few events, as the store writes them) sit in the runs folder
of one real Jupyter server with the extension (its own process). ``GET runs`` is asked once
(the index is built: every log's ends read) and then 30 times (one ``stat`` per folder). Target:
p95 <= 100 ms (issue 28: about 1 s with 500-650 runs before). Beside it, in the same run: the
same server's ``GET config`` p95, and reading every folder's log ends in one process (what each
listing did before the index).

Run: ``.venv/bin/python bench/bench_runs_list.py [--n 1000] [--rounds 30]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from common import Target, emit, figure  # noqa: E402

P95_MS = 100.0


def make_runs(runs: Path, n: int) -> None:
    from test_hosting_run_index import run_id, write_run

    runs.mkdir(parents=True)
    for number in range(n):
        write_run(runs, run_id(number))


def read_every_log(runs: Path) -> float:
    """Seconds to read each folder's log ends, as every listing did before the index."""
    from kernel_ext.hosting.summaries import disk_summary

    began = time.perf_counter()
    listed = [disk_summary(folder) for folder in sorted(runs.iterdir())]
    assert all(listed)
    return time.perf_counter() - began


async def timed(client, path: str, rounds: int, expect: int | None = None) -> list[float]:
    took = []
    for _ in range(rounds):
        began = time.perf_counter()
        answer = await client.get(path)
        took.append((time.perf_counter() - began) * 1000)
        assert answer.status_code == 200, answer.text
        if expect is not None:
            assert len(answer.json()["runs"]) == expect
    return took


async def bench(n: int, rounds: int):
    from run_load import client_for
    from server_process import start_server

    with tempfile.TemporaryDirectory(prefix="besser-bench-runs-") as workdir:
        make_runs(Path(workdir) / "root" / "besser_runs", n)
        without_index = read_every_log(Path(workdir) / "root" / "besser_runs")
        server = start_server(Path(workdir))
        try:
            async with client_for(server.agent_url, server.token) as client:
                first = await timed(client, "runs", 1, n)
                warm = await timed(client, "runs", rounds, n)
                config = await timed(client, "config", rounds)
        finally:
            server.stop()
    return first[0], warm, config, without_index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    from run_load import quantile

    first, warm, config, without = asyncio.run(bench(args.n, args.rounds))
    print(f"GET runs with {args.n} runs on disk: first {first:.0f} ms (index built), then p50 {quantile(warm, .5):.1f} ms "
          f"p95 {quantile(warm, .95):.1f} ms; GET config p95 {quantile(config, .95):.1f} ms; "
          f"reading every log's ends (no index) {without * 1000:.0f} ms")
    emit([
        figure(f"GET runs, {args.n} runs on disk (index warm), p95", [quantile(warm, .95)], "ms",
               baseline=("GET config p95, same server", quantile(config, .95)), target=Target("<=", P95_MS),
               group="runs-list", note=f"{args.rounds} requests; p50 {quantile(warm, .5):.1f} ms"),
        figure(f"GET runs, {args.n} runs on disk, first (index built)", [first], "ms",
               baseline=("every log's ends read in one process (each listing before)", without * 1000), group="runs-list",
               note="issue 28 measured about 1 s per listing with 500-650 runs before"),
    ])


if __name__ == "__main__":
    main()
