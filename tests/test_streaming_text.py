# ruff: noqa: F811 - the server fixture is imported from provider_server and requested by name
"""A model's text reaches the run view while it streams: a real OpenAI-compatible HTTP stream
(``provider_server``), held mid-reply, the run's real ``EventLog`` and the view's reducer."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from provider_server import Plan, loopback_only, openai_stream, server  # noqa: F401
from test_providers_openai import KEY, conversation, provider

from kernel_ext.cli.run_text import describe
from kernel_ext.hosting.bus import EventLog
from kernel_ext.pipeline.streaming import TextStream
from widgets.state import RunViewState

PIECES = ["Reading ", "the model, ", "then writing ", "the auth router."]


async def test_text_shows_in_the_view_before_the_reply_ends(server):
    body = openai_stream(PIECES, [], finish="stop")
    server.plan(Plan(chunks=body, stall_after=1 + 3))  # the role chunk and three pieces, then the stream waits
    events, state = EventLog("run-1"), RunViewState()
    events.add_listener(state.apply)
    stream = TextStream(events, "r1", interval=0)
    p = provider(server)
    reply = asyncio.ensure_future(p.complete(conversation(), on_text=stream.add))
    while not server.stalled.is_set():
        await asyncio.sleep(0.01)
    shown = "Reading the"  # what has arrived, less its last HOLD characters as read (spaces and commas are read past)
    deadline = asyncio.get_running_loop().time() + 30
    while state.texts != [shown]:  # the pieces sent before the stall reach the view (however busy the machine)
        assert not reply.done() and asyncio.get_running_loop().time() < deadline, state.texts
        await asyncio.sleep(0.01)
    assert not reply.done()  # while the reply waits
    partial = [e for e in events.events if e.type == "text"]
    assert all(e.partial and e.stream == "r1" for e in partial) and len(partial) == 1  # "Reading the model, " is all held back (15 characters as read)
    server.release.set()
    answer = await reply
    await p.aclose()
    events.emit("text", text=answer.text, stream=stream.final_id)  # as the loop does
    assert state.texts == ["Reading the model, then writing the auth router."]  # one line, now final
    final = events.events[-1]
    assert not final.partial and final.stream == "r1"
    assert describe(partial[0]) == "" and describe(final).startswith("  model: Reading")  # the CLI prints the final only


async def test_a_secret_split_across_pieces_never_reaches_an_event(server):
    pieces = ["the key is ", KEY[:10], KEY[10:20], KEY[20:], " and more"]
    server.plan(Plan(chunks=openai_stream(pieces, [], finish="stop")))
    events = EventLog("run-2", known_secrets=(KEY,))
    stream = TextStream(events, "r1", interval=0)
    p = provider(server)
    await p.complete(conversation(), on_text=stream.add)
    await p.aclose()
    texts = [e.text for e in events.events]
    assert len(texts) >= 2 and texts[-1] == "the key is ["  # the key cut whole; the rest held back
    runs = {KEY[i : i + 12] for i in range(len(KEY) - 11)}
    assert not [t for t in texts if any(run in t for run in runs)]
    assert not [t for t in texts if KEY[:10] in t or KEY[10:20] in t]  # shown pieces are whole stretches, redacted whole


def test_a_long_reply_streams_up_to_the_limit_and_at_most_once_per_interval():
    clock = SimpleNamespace(now=0.0)
    events = EventLog("run-3")
    stream = TextStream(events, "r2", interval=0.5, limit=60, clock=lambda: clock.now)
    for _ in range(10):
        clock.now += 0.1
        stream.add("abcdef ")
    shown = [e.text for e in events.events]
    assert len(shown) == 2 and shown[0] == "abcdef abcdef ab" and len(shown[1]) == 60  # every 0.5 s, then the limit
    stream.add("more")
    assert len(events.events) == 2 and stream.final_id == "r2"
    assert TextStream(events, "r3").final_id == ""  # nothing streamed: the final text carries no stream id


# A provider key (key-shaped: redacted by shape too) and an operator's secret with no key shape
# (only the known-secret matcher finds it, and only once 12 of its characters are there).
STREAMED_SECRETS = {"provider-key": KEY, "passphrase": "correct horse battery staple 42"}


@pytest.mark.parametrize("secret", list(STREAMED_SECRETS.values()), ids=list(STREAMED_SECRETS))
async def test_a_key_streamed_one_character_at_a_time_shows_no_prefix_in_any_partial_or_the_view(server, secret):
    """After ordinary text, a known key arrives one character per stream event over a real HTTP
    stream; a partial event follows every piece. No prefix of 3 or more of the key's characters
    may show in any partial or in the view at any moment: the held-back tail must outlast the
    matcher's shortest cut (the figure is not imported: a smaller hold-back must fail here)."""
    pieces = ["Here is the plan for the router, then ", *secret, " and the rest of the reply."]
    server.plan(Plan(chunks=openai_stream(pieces, [], finish="stop")))
    events, state = EventLog("run-4", known_secrets=(secret,)), RunViewState()
    seen: list[str] = []

    def view(event) -> None:
        state.apply(event)
        seen.extend(state.texts)

    events.add_listener(view)
    stream = TextStream(events, "r1", interval=0)
    p = provider(server)
    await p.complete(conversation(), on_text=stream.add)
    await p.aclose()
    partial = [e.text for e in events.events if e.type == "text" and e.partial]
    assert len(partial) >= len(secret) and stream.emitted == len(partial)  # a partial for (nearly) every piece
    assert any("Here is the plan" in t for t in partial)
    prefixes = [secret[:n] for n in range(3, len(secret) + 1)]
    assert not [t for t in partial + seen if any(prefix in t for prefix in prefixes)]
