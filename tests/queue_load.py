"""N runs queued behind one that holds the only place, then cancelled from the head, over REST:
what tests/test_hosting_queue_cost.py asserts and bench/bench_queue.py reports.

The server must run with ``max_concurrent_runs=1``. The place is held by the side-effects
scenario parked at its edit card (nobody answers it). Each queued run is followed over SSE from
its POST, as a kernel would; run k is cancelled only once run k-1's follower has seen its
``done`` (the test waits on events, never on time), so every run is at the head when it is
cancelled and every follower sees each place it is told (the bench sends the cancels back to
back instead). ``GET config`` is sampled meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from run_load import client_for, sample_config

HOLDER = {"kind": "scenario", "scenario": "side-effects"}


def queued_body(request_chars: int, number: int) -> dict:
    text = f"queued run {number}: " + "build a library app with books and authors; " * (request_chars // 44 + 1)
    return {"kind": "generate", "request": text[:request_chars], "provider": "none", "model_path": "example:library"}


@dataclass
class Follower:
    id: str
    run_dir: str
    positions: list[int] = field(default_factory=list)  # the places its ``queued`` events named, in order
    requests: list[str] = field(default_factory=list)  # each ``queued`` event's ``request`` ("" when it has none)
    status: str = ""
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class QueueRound:
    n: int
    request_chars: int
    followers: list[Follower]
    log_bytes: dict[str, int]  # run id -> size of its events.jsonl once ended
    cancel_s: float  # from the first cancel to the last run's ``done``
    floor_s: float  # as many ``GET runs/{id}``, back to back, before (what the requests alone cost here)
    config_ms: list[float]
    config_failures: int

    @property
    def total_bytes(self) -> int:
        return sum(self.log_bytes.values())


async def _follow(client: httpx.AsyncClient, follower: Follower, opened: asyncio.Event) -> None:
    try:
        async with client.stream("GET", f"runs/{follower.id}/events", timeout=httpx.Timeout(600, connect=60)) as stream:
            assert stream.status_code == 200
            opened.set()
            async for line in stream.aiter_lines():
                if not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                if event["type"] == "queued":
                    follower.positions.append(event["position"])
                    follower.requests.append(event.get("request", ""))
                elif event["type"] == "done":
                    follower.status = event["status"]
                    return
    finally:
        opened.set()
        follower.done.set()


async def _cancel(client: httpx.AsyncClient, run_id: str) -> None:
    answer = await client.post(f"runs/{run_id}/cancel", json={})
    assert answer.status_code == 200, answer.text


async def _holder_at_card(client: httpx.AsyncClient) -> str:
    """Start the holder and return its id once its follower saw its card (it now holds the place)."""
    answer = await client.post("runs", json=HOLDER)
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["run"]["id"]
    async with client.stream("GET", f"runs/{run_id}/events", timeout=httpx.Timeout(120, connect=60)) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data:") and json.loads(line[5:])["type"] == "approval_requested":
                return run_id
    raise AssertionError("the holder ended before it asked for approval")


async def queue_and_cancel(agent_url: str, token: str, n: int, *, request_chars: int = 1000,
                           runs_dir: Path, wait_each: bool = True) -> QueueRound:
    """``wait_each``: cancel run k once run k-1's ``done`` arrived (what the test asserts places by);
    else send the cancels back to back (each after the last one's answer), head first, then wait
    for every ``done`` (what the bench times, beside ``floor_s``: as many ``GET runs/{id}`` first)."""
    async with client_for(agent_url, token) as client, client_for(agent_url, token) as config_client:
        holder = await _holder_at_card(client)
        followers: list[Follower] = []
        tasks = []
        for number in range(n):
            answer = await client.post("runs", json=queued_body(request_chars, number))
            assert answer.status_code == 201, answer.text
            run = answer.json()["run"]
            assert run["status"] == "queued" and run["queue_position"] == number + 1, run
            follower = Follower(run["id"], run["run_dir"])
            opened = asyncio.Event()
            tasks.append(asyncio.create_task(_follow(client, follower, opened)))
            await opened.wait()
            followers.append(follower)
        began = time.perf_counter()
        for follower in followers:  # the HTTP floor: the same number of requests, back to back, that change nothing
            assert (await client.get(f"runs/{follower.id}")).status_code == 200
        floor_s = time.perf_counter() - began
        latencies: list[float] = []
        finished = asyncio.Event()
        sampler = asyncio.create_task(sample_config(config_client, finished, 0.05, latencies))
        began = time.perf_counter()
        try:
            for follower in followers:
                await _cancel(client, follower.id)
                if wait_each:
                    await asyncio.wait_for(follower.done.wait(), 120)
            await asyncio.wait_for(asyncio.gather(*(f.done.wait() for f in followers)), 300)
            cancel_s = time.perf_counter() - began
        finally:
            finished.set()
            failures = await sampler
            await client.post(f"runs/{holder}/cancel", json={})
        await asyncio.gather(*tasks)
    sizes = {f.id: (runs_dir / f.id / "events.jsonl").stat().st_size for f in followers}
    return QueueRound(n, request_chars, followers, sizes, cancel_s, floor_s, latencies, failures)
