"""What a long queue costs: 200 runs wait behind one that holds the only place, then are cancelled.

One real Jupyter server with the extension (its own process, ``max_concurrent_runs=1``); the place
is held by the side-effects scenario parked at a card. 200 generate runs are started over REST
and each is followed over SSE; then they are cancelled head first, back to back, and the script
waits for every ``done`` (``tests/queue_load.py``, the slow test's driver). Figures: the runs'
event logs in all (target <= 2 MB; the request is in each log once, so a log is its request plus a
bounded rest, shown too), the time from the first cancel to the last ``done`` (<= 2 s; beside as
many ``GET runs/{id}`` back to back on the same server: what the requests alone cost here), and
``GET config`` p95 while they are cancelled (<= 100 ms), beside the same server's idle p95.
Issue 28 measured 389 MB, 50-60 s and 0.76-1.09 s before the fix.

Beside the cancel time, the same 200 cancels in this process with no HTTP (``in_process``: the
server's admission queue and the runs' real event logs on disk, each waiting run a task, cancelled
head first): what the server's own work per cancel costs, so the rest of the cancel time is the
requests and the streams. Measured 2026-12 (H4): 0.21 s in process for 200 cancels and ~3,100
events; over HTTP 1.59 / 2.62 / 3.73 s at load average 6 / 7 / 13 on 2 cores, beside a floor of 200
plain ``GET runs/{id}`` of 0.95 / 1.08 / 2.70 s. So no cancel does O(n) work or syncs a file; the
2 s target is met on a quiet machine and missed by what the requests themselves cost under load
(issue 28's 7.6-10.9 s were measured at load average 7-18).

Run: ``.venv/bin/python bench/bench_queue.py [--n 200] [--request-chars 1000]``
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

BYTES_TARGET_MB, CANCEL_TARGET_S, CONFIG_P95_MS = 2.0, 2.0, 100.0


async def idle_config(agent_url: str, token: str, seconds: float = 2.0) -> list[float]:
    from run_load import client_for, sample_config

    latencies: list[float] = []
    stop = asyncio.Event()
    async with client_for(agent_url, token) as client:
        sampler = asyncio.create_task(sample_config(client, stop, 0.05, latencies))
        await asyncio.sleep(seconds)
        stop.set()
        await sampler
    return latencies


async def in_process(n: int, request_chars: int) -> tuple[float, int]:
    """(seconds, events): ``n`` runs queued behind one in a real ``Admission`` with real event logs
    on disk, then cancelled head first, each after the last one's ``done`` was written."""
    from kernel_ext.hosting.admission import Admission
    from kernel_ext.hosting.bus import EventLog

    with tempfile.TemporaryDirectory(prefix="besser-bench-queue-inproc-") as tmp:
        admission, hold = Admission(1), asyncio.Event()
        logs = [EventLog(f"r{i}", Path(tmp) / f"r{i}" / "events.jsonl") for i in range(n + 1)]

        async def run(events: EventLog) -> None:
            async with admission.slot(events, "x" * request_chars):
                await hold.wait()

        tasks = [asyncio.create_task(run(events)) for events in logs]
        while admission.waiting < n:
            await asyncio.sleep(0)
        began = time.perf_counter()
        for task, events in zip(tasks[1:], logs[1:], strict=True):
            task.cancel()
            while not events.closed:
                await asyncio.sleep(0)
        seconds = time.perf_counter() - began
        hold.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for events in logs:
            events.close_file()
        return seconds, sum(len(events.events) for events in logs)


async def bench(n: int, request_chars: int):
    from queue_load import queue_and_cancel
    from server_process import start_server

    with tempfile.TemporaryDirectory(prefix="besser-bench-queue-") as workdir:
        server = start_server(Path(workdir), args=("--BesserAgentApp.max_concurrent_runs=1",))
        try:
            idle = await idle_config(server.agent_url, server.token)
            result = await queue_and_cancel(server.agent_url, server.token, n, request_chars=request_chars,
                                            runs_dir=server.root_dir / "besser_runs", wait_each=False)
        finally:
            server.stop()
    return idle, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--request-chars", type=int, default=1000)
    args = parser.parse_args()
    from run_load import quantile

    idle, result = asyncio.run(bench(args.n, args.request_chars))
    inproc_s, inproc_events = asyncio.run(in_process(args.n, args.request_chars))
    rest = [size - args.request_chars for size in result.log_bytes.values()]
    statuses = sorted({f.status for f in result.followers})
    print(f"{args.n} queued runs ({args.request_chars}-character requests): {result.total_bytes / 1e6:.3f} MB of event logs "
          f"(each its request + {min(rest)}-{max(rest)} bytes); cancelled in {result.cancel_s:.2f} s ({args.n} GETs: "
          f"{result.floor_s:.2f} s); GET config p95 "
          f"{quantile(result.config_ms, .95):.1f} ms (idle {quantile(idle, .95):.1f} ms); statuses {statuses}")
    print(f"the same {args.n} cancels in process, no HTTP: {inproc_s:.2f} s for {inproc_events} events")
    note = f"{args.n} runs, {args.request_chars}-character requests; issue 28 measured 389 MB, 50-60 s, 0.76-1.09 s before"
    emit([
        figure("queue: event logs of 200 queued runs, in all", [result.total_bytes / 1e6], "MB",
               target=Target("<=", BYTES_TARGET_MB), group="queue", note=note),
        figure("queue: a queued run's log beyond its request", rest, "bytes", group="queue",
               note="the request is written once; the rest is the places it was told, its error and done"),
        figure("queue: cancel all, head first (first cancel to last done)", [result.cancel_s], "s",
               baseline=(f"{args.n} GET runs/{{id}}", result.floor_s), target=Target("<=", CANCEL_TARGET_S), group="queue",
               note=note + f"; the server's own work for these cancels is {inproc_s:.2f} s (in process, no HTTP): "
                           "what is above it is the requests and the streams, which grow with the machine's load"),
        figure("queue: cancel all in process, no HTTP (the server's own work)", [inproc_s], "s",
               group="queue", note=f"{inproc_events} events written; admission queue and real logs, no requests or streams"),
        figure("queue: GET config p95 while cancelling", [quantile(result.config_ms, .95)], "ms",
               baseline=("idle server", quantile(idle, .95)), target=Target("<=", CONFIG_P95_MS), group="queue",
               note=f"{len(result.config_ms)} samples, {result.config_failures} failed; max {max(result.config_ms):.0f} ms"),
    ])


if __name__ == "__main__":
    main()
