"""Events/s into a ``RunView`` (real ipywidgets, no front end): a handful of calls vs 200 folded.

    PYTHONPATH=. python bench/bench_runview.py

1. handful: notebook 01's recorded run (tests/data/library_jwt_run.events.jsonl: 72 events,
   10 calls, 8 cards) replayed into a fresh view, again and again;
2. 200 folded: the same run's own call blocks (tool_call, approval_requested, approval_resolved,
   tool_result, with their real card payloads) repeated under fresh call ids until 200 calls
   are decided, replayed whole into a fresh view;
3. with those 200 rows folded in the view, 2,000 more events of a running run (text, cost,
   phase ticks, and a new decided call every 20 events): what a long run costs per event.
The baseline of each is the handful figure of the same run. Nothing is sent anywhere (no
kernel, no comm): this is the view's own cost, rendering included.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Target, emit, figure  # noqa: E402 - bench scripts import their helpers by path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "library_jwt_run.events.jsonl"
REPEATS = 15
FOLDED = 200
TAIL = 2000


def recorded() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines()]


def call_blocks(events: list[dict]) -> list[list[dict]]:
    """The recorded run's calls, each as the events that carry it (in order)."""
    blocks: dict[str, list[dict]] = {}
    for event in events:
        if event["type"] in ("tool_call", "approval_requested", "approval_resolved", "tool_result"):
            blocks.setdefault(event["call_id"], []).append(event)
    return [block for block in blocks.values() if block[0]["type"] == "tool_call"]


def long_run(events: list[dict], calls: int) -> list[dict]:
    """The recorded run's start, then its call blocks repeated under fresh ids up to ``calls`` calls."""
    start = [e for e in events if e["seq"] < next(e["seq"] for e in events if e["type"] == "tool_call")]
    blocks = call_blocks(events)
    out = [dict(e) for e in start]
    for n in range(calls):
        for event in blocks[n % len(blocks)]:
            copy = dict(event, call_id=f"b{n}")
            if "request" in copy:
                copy["request"] = dict(copy["request"], call_id=f"b{n}")
            out.append(copy)
    for seq, event in enumerate(out, 1):
        event["seq"] = seq
    return out


def running_tail(first_seq: int, count: int, blocks: list[list[dict]]) -> list[dict]:
    """What a run keeps sending: text, cost ticks, phase messages, and a decided call every 20 events."""
    out: list[dict] = []
    n = 0
    while len(out) < count:
        k = len(out) % 20
        if k == 0:
            for event in blocks[n % len(blocks)]:
                out.append(dict(event, call_id=f"t{n}"))
            n += 1
        elif k % 3 == 0:
            out.append({"type": "cost", "run_id": "r", "input_tokens": 10 * k, "output_tokens": k, "cost_usd": 0.0, "turns": n})
        elif k % 3 == 1:
            out.append({"type": "text", "run_id": "r", "text": f"step {len(out)}"})
        else:
            out.append({"type": "phase", "run_id": "r", "phase": "customize", "status": "started", "message": "working"})
    for seq, event in enumerate(out[:count], first_seq):
        event["seq"] = seq
    return out[:count]


def rate(events: list[dict], view=None) -> float:
    """Events/s of one synchronous replay on a running loop (as in a kernel, where a view is fed
    from its event loop); the loop's pending callbacks (a card's syntax colours) are timed too."""
    from widgets.runview import RunView

    async def replay() -> float:
        target = RunView() if view is None else view
        start = time.perf_counter()
        for event in events:
            target.apply(event)
        await asyncio.sleep(0)  # what the replay left for the next loop turn
        return len(events) / (time.perf_counter() - start)

    return asyncio.run(replay())


def main() -> None:
    from widgets.runview import RunView

    base = recorded()
    rates_handful = [rate(base) for _ in range(REPEATS)]
    folded_log = long_run(base, FOLDED)
    rates_folded = [rate(folded_log) for _ in range(max(3, REPEATS // 5))]
    tails = []
    for _ in range(3):
        view = RunView().replay(folded_log)
        assert len(view._decided_box.children) == FOLDED and not view._pending_box.children
        tails.append(rate(running_tail(len(folded_log) + 1, TAIL, call_blocks(base)), view))
    handful = statistics.median(rates_handful)
    print(f"1. handful ({len(base)} events, 10 calls): {handful:,.0f} events/s (min {min(rates_handful):,.0f})")
    print(f"2. {FOLDED} decided calls folded ({len(folded_log)} events): {statistics.median(rates_folded):,.0f} events/s")
    print(f"3. {TAIL} more events with {FOLDED} rows folded: {statistics.median(tails):,.0f} events/s")
    emit([
        figure(f"RunView replay, a handful of calls ({len(base)} events)", rates_handful, "events/s", target=Target(">=", 1000)),
        figure(f"RunView replay, {FOLDED} decided calls folded", rates_folded, "events/s",
               baseline=("a handful of calls", rates_handful), target=Target(">=", 1000)),
        figure(f"RunView, {TAIL} events into a view with {FOLDED} rows folded", tails, "events/s",
               baseline=("a handful of calls", rates_handful), target=Target(">=", 1000)),
    ])


if __name__ == "__main__":
    main()
