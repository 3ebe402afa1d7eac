"""Queueing costs O(1) per run and per move (issue 28, item 4).

200 runs wait behind one that holds the only place on a real Jupyter server (its own process),
and are cancelled from the head over REST. Before, every move re-sent each waiting run its whole
request (389 MB for 200 runs); now the request is sent once, and a run is told its place every
move near the head, as it halves further back. Asserted: each log is its request plus a bounded
rest, all of them under 2 MB, and every follower saw exactly the places the rule tells it (from
its first place down to 1, the place it was cancelled at); the widget renders the last one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from queue_load import queue_and_cancel
from server_process import start_server

from kernel_ext.hosting.admission import EXACT_PLACES, worth_telling
from kernel_ext.hosting.events import parse_event
from widgets.render import header_html
from widgets.state import RunViewState

N = 200
REQUEST_CHARS = 4000
REST_OF_A_LOG = 4096  # bytes a cancelled queued run's log may hold beyond its request

pytestmark = [pytest.mark.slow]


def told(first: int) -> list[int]:
    """The places a run that entered at ``first`` is told while every run ahead of it leaves."""
    places, last = [first], first
    for place in range(first - 1, 0, -1):
        if worth_telling(last, place):
            places.append(place)
            last = place
    return places


def test_the_rule_tells_every_move_near_the_head_and_each_halving_behind_it():
    assert told(5) == [5, 4, 3, 2, 1]
    assert told(200) == [200, 127, 63, 31, 15, *range(EXACT_PLACES, 0, -1)]
    assert len(told(100_000)) == 1 + (17 - 4) + EXACT_PLACES  # each bit of the place above 10's, then the exact places


async def test_two_hundred_queued_runs_cancelled_from_the_head_write_linear_logs_and_see_their_places(tmp_path: Path):
    server = start_server(tmp_path, args=("--BesserAgentApp.max_concurrent_runs=1",))
    try:
        result = await queue_and_cancel(server.agent_url, server.token, N, request_chars=REQUEST_CHARS,
                                        runs_dir=server.root_dir / "besser_runs")
    finally:
        server.stop()
    print(f"\n{N} queued runs: {result.total_bytes / 1e6:.2f} MB of logs; cancelled in {result.cancel_s:.1f} s")

    for number, follower in enumerate(result.followers):
        assert follower.status == "cancelled", (follower.id, follower.status)
        assert follower.positions == told(number + 1), (number, follower.positions)
        assert follower.requests[0].startswith(f"queued run {number}: ") and not any(follower.requests[1:])
        assert result.log_bytes[follower.id] <= REQUEST_CHARS + REST_OF_A_LOG, (follower.id, result.log_bytes[follower.id])
    assert result.total_bytes < 2_000_000

    last = result.followers[-1]
    lines = (Path(last.run_dir) / "events.jsonl").read_text().splitlines()
    waiting = [parse_event(line).model_dump(mode="json") for line in lines[:-2]]  # before its error and done
    view = RunViewState.replay(waiting)
    assert view.status_text == "queued, position 1" and "queued, position 1" in header_html(view)
    assert view.request.startswith(f"queued run {N - 1}: ")
    assert [json.loads(line)["type"] for line in lines[-2:]] == ["error", "done"]
