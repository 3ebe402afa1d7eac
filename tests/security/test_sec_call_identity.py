# ruff: noqa: F811 - fixtures imported from jupyter_fixtures / provider_server are requested by name
"""Call identity is the host's: every card can be decided once and only once, whatever id the endpoint sent.

A real loopback endpoint (OpenAI or Anthropic streaming; authored turns, not a live LLM) proposes
``write_file`` calls with no id, ``call_0`` on every turn, ids with ``/``, a space, non-ASCII
and 200 characters, and two calls sharing one id in a reply. The run is the real tool loop over
a real Executor; its cards are decided through each entry point that decides cards: the Python
API (``run.decide``), REST on a real Jupyter server, and the notebook's run view (in-process).
A re-sent decision is refused by name and never approves the next, different call; a decision
naming another request's digest is refused; only the approved files exist; nothing outside the
workspace changes. On the wire, each result is paired with the endpoint's own id (or, where it
sent none or repeated one, with one the host invented).
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    poll,
    runs_dir,
)
from provider_server import loopback_only, server  # noqa: F401
from tornado.httpclient import HTTPClientError

from kernel_ext.boundary.calls import HOST_ID
from kernel_ext.hosting.layout import RunLayout
from kernel_ext.hosting.run import start_run
from kernel_ext.server.handlers import CALL
from kernel_ext.server.handlers.base import STATE_KEY

from .hostile_endpoint import PROTOCOLS, loop_body, provider, tree, turn

# (endpoint id, approve?) per card; the last two arrive together in one reply, both "call_0"
SHAPES = [None, "call_0", "call_0", "dir/../x", "has space", "é-非-☃", "x" * 200, "call_0", "call_0"]
DENIED = {4}  # "has space" is denied: a denial is a decision too


def plans(protocol: str):
    out = [turn(protocol, [f"card {i}"], [(cid, "write_file", {"path": f"f{i}.py", "content": f"N = {i}\n"})]) for i, cid in enumerate(SHAPES[:-2])]
    pair = [(cid, "write_file", {"path": f"f{i}.py", "content": f"N = {i}\n"}) for i, cid in enumerate(SHAPES) if i >= len(SHAPES) - 2]
    return [*out, turn(protocol, ["two at once"], pair), turn(protocol, ["all written"])]


class Deciders:
    """One way per entry point to send a decision; each answers the refusal code ("" when taken)."""

    def __init__(self, kind: str, run, jp_fetch=None):
        self.kind, self.run, self.jp_fetch, self.view = kind, run, jp_fetch, None
        if kind == "notebook":
            from widgets.runview import RunView

            self.view = RunView(run_id=run.id, decide=run.decide, note="in-process")
            self.view.replay(run.events.events)
            run.events.add_listener(self.view.apply)

    async def send(self, call_id: str, approved: bool, digest: str | None = None) -> str:
        if self.kind == "python":
            verdict = self.run.decide(call_id, approved, digest=digest)
            return verdict.code
        if self.kind == "rest":
            body = {"approved": approved} if digest is None else {"approved": approved, "digest": digest}
            try:
                await self.jp_fetch("besser-agent", "runs", self.run.id, "approvals", call_id, method="POST", body=json.dumps(body))
            except HTTPClientError as exc:
                answer = json.loads(exc.response.body)
                assert exc.code == (404 if answer["code"] == "NO_SUCH_APPROVAL" else 409), (exc.code, answer)
                assert "\n" not in answer["message"] and answer["message"], answer
                return answer["code"]
            return ""
        # the notebook: a click on this call's own card (digest sent by the card); a re-click is inert
        if call_id not in self.view.state.card_of_call:
            return "NO_SUCH_APPROVAL"  # no card, nothing to click
        card = self.view.card(call_id)
        before = dict(self.run.context.approver.decided)
        if digest is not None and digest != card.card.digest:
            return self.run.decide(call_id, approved, digest=digest).code  # a stale card: the same check
        was_decided = card.decided
        card.click(approved)
        if was_decided or self.run.context.approver.decided == before:
            return "ALREADY_DECIDED"
        return ""


def _digest(run, call_id: str) -> str:
    return next(e.digest for e in run.events.events if e.type == "approval_requested" and e.call_id == call_id)


async def _decide_every_card(run, deciders: Deciders) -> list[str]:
    seen: list[str] = []
    for index in range(len(SHAPES)):
        pending = await poll(lambda: [c for c in run.pending_approvals() if c not in seen])
        call_id = pending[0]
        assert HOST_ID.fullmatch(call_id) and re.fullmatch(CALL, call_id), call_id  # the host's id, and the route takes it
        assert call_id not in seen
        digest = _digest(run, call_id)
        assert re.fullmatch(r"[0-9a-f]{64}", digest)
        if seen:  # the previous card's decision sent again (a double click, a retried POST)
            assert await deciders.send(seen[-1], True) == "ALREADY_DECIDED"
            assert await deciders.send(seen[-1], True, _digest(run, seen[-1])) == "ALREADY_DECIDED"
            assert call_id in run.pending_approvals() and call_id not in run.context.approver.decided
        # a digest of another request never settles this one
        assert await deciders.send(call_id, True, "0" * 64) == "STALE_REQUEST"
        assert call_id in run.pending_approvals()
        approved = index not in DENIED
        assert await deciders.send(call_id, approved, digest if index % 2 else None) == ""
        assert run.context.approver.decided[call_id] is approved
        assert await deciders.send(call_id, not approved) == "ALREADY_DECIDED"
        seen.append(call_id)
    for foreign in ("c999", "call_0", "has space", "é-非-☃", "x" * 200):  # an endpoint's id is never a card's
        assert await deciders.send(foreign, True) == "NO_SUCH_APPROVAL"
    return seen


def _wire_pairs(protocol: str, body: dict) -> list[tuple[list[str], list[str]]]:
    """(ids of an assistant turn's calls, ids its results answered under), for each turn."""
    pairs = []
    messages = body["messages"]
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        if protocol == "openai":
            calls = [c["id"] for c in message.get("tool_calls") or ()]
            answers = [m["tool_call_id"] for m in messages[i + 1 :] if m["role"] == "tool"][: len(calls)]
        else:
            calls = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
            following = messages[i + 1]["content"] if i + 1 < len(messages) else []
            answers = [b["tool_use_id"] for b in following if b["type"] == "tool_result"]
        if calls:
            pairs.append((calls, answers))
    return pairs


@pytest.mark.parametrize("entry", ["python", "notebook"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_card_is_decided_once_and_only_once_in_process(protocol, entry, server, tmp_path):
    await _every_card_once(protocol, entry, server, tmp_path, lambda body: start_run(body, RunLayout.create(tmp_path / "runs")))


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_card_is_decided_once_and_only_once_over_rest(protocol, server, tmp_path, jp_fetch, jp_serverapp):
    manager = jp_serverapp.web_app.settings[STATE_KEY].manager
    await _every_card_once(protocol, "rest", server, tmp_path, manager.start_body, jp_fetch)


async def _every_card_once(protocol, entry, server, tmp_path, start, jp_fetch=None):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("untouched\n")
    before_outside = tree(outside)
    server.plan(*plans(protocol))
    outcome: list = []
    run = start(loop_body(provider(protocol, server), ws, outcome))
    deciders = Deciders(entry, run, jp_fetch)
    host_ids = await _decide_every_card(run, deciders)
    done = await asyncio.wait_for(run.wait(), 30)
    assert done is not None and done.status == "completed", [(e.type, getattr(e, "message", "")) for e in run.events.events]
    assert outcome[0].stop == "finished"

    # exactly the approved calls ran, each once, under its own host id; the denied one wrote nothing
    expected = {f"f{i}.py": f"N = {i}\n".encode() for i in range(len(SHAPES)) if i not in DENIED}
    assert tree(ws) == expected
    assert tree(outside) == before_outside
    results = {e.call_id: (e.ok, e.error_code) for e in run.events.events if e.type == "tool_result"}
    assert list(results) == host_ids == [f"c{i}" for i in range(1, len(SHAPES) + 1)]
    assert [results[c] for c in host_ids] == [(False, "approval_denied") if i in DENIED else (True, None) for i in range(len(SHAPES))]
    resolved = [e.call_id for e in run.events.events if e.type == "approval_resolved"]
    assert resolved == host_ids  # one decision per card, never two

    # the notebook: one card per call, each its own widget, none taken over
    if deciders.view is not None:
        assert [c.call_id for c in deciders.view.cards] == host_ids
        assert len({id(c) for c in deciders.view.cards}) == len(host_ids) and all(c.decided for c in deciders.view.cards)

    # on the wire: every result answers its call under the endpoint's id, or one the host invented
    last = server.requests[-1].body
    pairs = _wire_pairs(protocol, last)
    assert [answers for _, answers in pairs] == [calls for calls, _ in pairs]
    wire = [cid for calls, _ in pairs for cid in calls]
    assert wire[0] == "c1"  # no id sent: the host's own
    assert wire[1:7] == SHAPES[1:7]  # the endpoint's ids, kept verbatim for the wire only
    assert wire[7] == "call_0" and wire[8] == "c9"  # a repeat inside one reply: the host invents the second


# -- a decision belongs to its run --------------------------------------------------------------


@pytest.mark.parametrize("entry", ["python", "rest"])
async def test_a_digest_from_another_run_settles_nothing(entry, server, tmp_path, jp_fetch, jp_serverapp):
    """Runs A and B propose the very same card ``c1`` (same tool, arguments, files): their digests
    differ (the run is bound into it), so B's digest sent for A's ``c1`` is ``STALE_REQUEST``."""
    same = (None, "write_file", {"path": "same.py", "content": "SAME = 1\n"})
    server.plan(*[turn("openai", ["card"], [same]) for _ in range(2)], *[turn("openai", ["all written"]) for _ in range(2)])
    if entry == "rest":
        start = jp_serverapp.web_app.settings[STATE_KEY].manager.start_body
    else:
        start = lambda body: start_run(body, RunLayout.create(tmp_path / "runs"))
    runs, spaces = [], []
    for name in ("a", "b"):
        ws = tmp_path / f"ws-{name}"
        ws.mkdir()
        spaces.append(ws)
        runs.append(start(loop_body(provider("openai", server), ws, [])))
        assert await poll(lambda run=runs[-1]: run.pending_approvals()) == ("c1",)
    a, b = runs
    card_a, card_b = (next(e.request for e in r.events.events if e.type == "approval_requested") for r in runs)
    assert card_a == card_b  # the same request as shown ...
    assert _digest(a, "c1") != _digest(b, "c1")  # ... bound to different runs
    decide_a, decide_b = Deciders(entry, a, jp_fetch), Deciders(entry, b, jp_fetch)
    assert await decide_a.send("c1", True, _digest(b, "c1")) == "STALE_REQUEST"
    assert "c1" in a.pending_approvals() and not (spaces[0] / "same.py").exists()
    assert await decide_a.send("c1", True, _digest(a, "c1")) == ""
    assert await decide_b.send("c1", False, _digest(b, "c1")) == ""
    for run in runs:
        assert (await asyncio.wait_for(run.wait(), 30)).status == "completed"
    assert tree(spaces[0]) == {"same.py": b"SAME = 1\n"} and tree(spaces[1]) == {}
