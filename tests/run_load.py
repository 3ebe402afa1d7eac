"""N demo runs started at once on one server through REST, followed to their end, while
``GET config`` is sampled: what tests/test_server_load.py asserts and bench/bench_concurrency.py
reports. It talks to a server only through its REST root and a token, so the same driver serves
any single-user server (one started by ``server_process.start_server``, a hub user's).

Each run is the demo (the Library model, the shipped ``library-jwt`` cassette through the replay
provider, ``approve: all``), followed over SSE as a kernel would. A run's time is from its POST to
its ``done`` (queueing included: that is what the person waits).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from kernel_ext.scenarios.library_jwt import REQUEST

DEMO = {"kind": "generate", "request": REQUEST, "model_path": "example:library", "provider": "replay:library-jwt",
        "approve": "all"}
HOST_LOST = ("app host of this run was closed", "host_died", "host_unresponsive")  # what a run that lost its host says


@dataclass
class Followed:
    """One run as its follower saw it."""

    id: str
    run_dir: str
    status: str = ""
    summary: str = ""
    seconds: float = 0.0
    positions: list[int] = field(default_factory=list)  # queue positions its log reported, in order
    host_lost: bool = False
    events: int = 0
    errors: list[str] = field(default_factory=list)  # its error events, "CODE: message"
    latencies: list[float] = field(default_factory=list)  # per event: arrival (wall clock) - its ``ts``, in s
    answered: int = 0  # approval cards this follower answered by REST (``answer_cards``)


@dataclass
class Load:
    """The outcome of one round of ``n`` runs at once."""

    n: int
    runs: list[Followed]
    config_ms: list[float]  # GET config latencies sampled while the runs were queued or running
    config_failures: int
    wall_s: float
    alongside: Any = None  # what the ``alongside`` coroutine returned

    @property
    def completed(self) -> int:
        return sum(run.status == "completed" for run in self.runs)

    def run_seconds(self, q: float) -> float:
        return quantile([run.seconds for run in self.runs], q)

    def config_p(self, q: float) -> float:
        return quantile(self.config_ms, q)


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile, nearest rank (the value at or above which ``1 - q`` of them lie)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(-(-q * len(ordered) // 1)) - 1))]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def start(client: httpx.AsyncClient, body: dict | None = None) -> dict:
    answer = await client.post("runs", json=body or DEMO)
    assert answer.status_code == 201, answer.text
    return answer.json()["run"]


async def follow(client: httpx.AsyncClient, run: dict, started: float, timeout: float, *,
                 answer_cards: bool = False) -> Followed:
    """Read the run's SSE stream to its ``done``; ``answer_cards``: approve each card as it comes, by REST
    (a script in a person's place, for a run started with ``approve: none``)."""
    seen = Followed(run["id"], run["run_dir"])
    async with client.stream("GET", f"runs/{run['id']}/events", timeout=httpx.Timeout(timeout, connect=30)) as stream:
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if not line.startswith("data:"):
                continue
            text = line[5:].strip()
            event = json.loads(text)
            seen.latencies.append(time.time() - event["ts"])
            seen.events += 1
            seen.host_lost = seen.host_lost or any(mark in text for mark in HOST_LOST)
            if event["type"] == "error":
                seen.errors.append(f"{event['code']}: {event['message']}")
            elif event["type"] == "approval_requested" and answer_cards:
                answer = await client.post(f"runs/{run['id']}/approvals/{event['call_id']}",
                                           json={"approved": True, "digest": event.get("digest") or None})
                assert answer.status_code == 200, answer.text
                seen.answered += 1
            elif event["type"] == "queued" and event["position"] > 0:
                seen.positions.append(event["position"])
            elif event["type"] == "done":
                seen.status, seen.summary = event["status"], event.get("summary", "")
                break
    seen.seconds = time.monotonic() - started
    return seen


async def sample_config(client: httpx.AsyncClient, until: asyncio.Event, interval: float, into: list[float]) -> int:
    """``GET config`` every ``interval`` s until ``until`` is set; latencies (ms) into ``into``; failures returned."""
    failures = 0
    while not until.is_set():
        began = time.perf_counter()
        try:
            answer = await client.get("config", timeout=30)
            failures += answer.status_code != 200
        except httpx.HTTPError:
            failures += 1
        into.append((time.perf_counter() - began) * 1000)
        try:
            await asyncio.wait_for(until.wait(), interval)
        except TimeoutError:
            pass
    return failures


def client_for(agent_url: str, token: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    return httpx.AsyncClient(base_url=agent_url, headers={"Authorization": f"token {token}"}, timeout=60, limits=limits)


async def load(agent_url: str, token: str, n: int, *, timeout: float = 900.0, interval: float = 0.1,
               alongside: Callable[[httpx.AsyncClient], Awaitable[Any]] | None = None) -> Load:
    """Start ``n`` demo runs at once, follow each to its end, sample ``GET config`` meanwhile;
    ``alongside(client)`` (what a test does meanwhile) starts once the ``n`` runs are started."""
    async with client_for(agent_url, token) as runs_client, client_for(agent_url, token) as config_client:
        latencies: list[float] = []
        finished = asyncio.Event()
        sampler = asyncio.create_task(sample_config(config_client, finished, interval, latencies))
        began = time.monotonic()
        started = await asyncio.gather(*(start(runs_client) for _ in range(n)))
        followers = asyncio.gather(*(follow(runs_client, run, began, timeout) for run in started))
        extra = asyncio.ensure_future(alongside(runs_client) if alongside is not None else asyncio.sleep(0))
        try:
            followed = await asyncio.wait_for(followers, timeout)
            wall = time.monotonic() - began
            beside = await asyncio.wait_for(extra, timeout)
        finally:
            finished.set()
            failures = await sampler
            extra.cancel()
        return Load(n, list(followed), latencies, failures, wall, beside)
