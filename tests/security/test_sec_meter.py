# ruff: noqa: F811 - fixtures imported from jupyter_fixtures / provider_server are requested by name
"""A meter that cannot be disarmed by the usage an endpoint reports.

A real loopback endpoint (OpenAI or Anthropic streaming; authored turns, not a live LLM) reports
sane usage, then negative, astronomically large (``10**400``, ``10**12``), non-numeric
(``"abc"``), NaN or boolean counts, then sane usage again. Each unusable figure is refused by
name (a ``USAGE_REFUSED`` event), the call is counted as an estimate from its size, tokens and
cost never decrease, nothing overflows, and the cost cap and the token budget still stop the
loop. Hosted runs of the real tool loop, through the Python API and REST on a real Jupyter server.
"""

from __future__ import annotations

import asyncio
import itertools
import math

import pytest
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    runs_dir,
)
from provider_server import loopback_only, server  # noqa: F401

from kernel_ext.hosting.layout import RunLayout
from kernel_ext.hosting.run import start_run
from kernel_ext.pipeline.guards import Budgets
from kernel_ext.providers.events import Usage
from kernel_ext.providers.meter import CostMeter
from kernel_ext.server.handlers.base import STATE_KEY

from .hostile_endpoint import MODELS, PROTOCOLS, loop_body, provider, tree, turn

BAD = {
    "negative": -1_000_000_000_000,
    "beyond_floats": 10**400,
    "absurd": 10**12,
    "text": "abc",
    "nan": float("nan"),
    "bool": True,
}
# A sane turn reports far more than its size suggests, so the budgets' own mid-stream estimate
# (about four characters a token) never cuts the hostile turn before its usage arrives.
SANE = {"input": 20_000, "output": 2_000}
LIMITS = {  # (cost cap, token budget): each alone must stop the loop after the hostile turn
    "cost_cap": (True, 10**9),
    "token_budget": (None, 33_000),
}


def plans(protocol: str, bad):
    listing = [(None, "list_files", {})]
    return [
        turn(protocol, ["looking"], listing, usage=SANE),
        turn(protocol, ["looking again"], listing, usage={"input": bad, "output": bad}),
        turn(protocol, ["and again"], listing, usage=SANE),
        *[turn(protocol, ["still going"], listing, usage=SANE) for _ in range(6)],
    ]


async def _hosted(protocol, bad, limit, server, tmp_path, start):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "app.py").write_text("A = 1\n")
    cap, tokens = LIMITS[limit]
    if cap is not None:  # half a sane turn above one sane turn's price: only the hostile turn can cross it
        cap = CostMeter().pricing.cost(MODELS[protocol], Usage(SANE["input"], SANE["output"])) * 1.5
    meter = CostMeter(cap_usd=cap)
    server.plan(*plans(protocol, bad))
    outcome: list = []
    run = start(loop_body(provider(protocol, server, meter), ws, outcome, budgets=Budgets(max_turns=20, max_tokens=tokens, max_cost_usd=0)))
    done = await asyncio.wait_for(run.wait(), 30)
    events = run.events.events
    assert done is not None and done.status == "completed", [(e.type, getattr(e, "message", "")) for e in events]
    assert not [e for e in events if e.type == "error" and e.code == "INTERNAL"]

    refused = [e.message for e in events if e.type == "error" and e.code == "USAGE_REFUSED"]
    assert refused and all(not e.terminal for e in events if e.type == "error" and e.code == "USAGE_REFUSED")
    assert any(word in refused[0] for word in ("negative", "not a number", "not a finite number", "over 1,000,000,000")), refused

    costs = [(e.input_tokens, e.output_tokens, e.cost_usd) for e in events if e.type == "cost"]
    assert len(costs) >= 2
    for earlier, later in itertools.pairwise(costs):
        assert all(b >= a for a, b in zip(earlier, later)), costs  # nothing ever goes down
    assert all(math.isfinite(c) and 0 <= c < 1 for _, _, c in costs) and costs[1][0] > costs[0][0]
    assert meter.usage.total_tokens < 10**7 and math.isfinite(meter.cost_usd)

    # the limit still fires: the loop stops there, after three turns at most
    stop = outcome[0]
    assert stop.stop == "budget" and stop.turns <= 3, stop
    named = [e for e in events if e.type == "error" and e.code in ("COST_CAP", "BUDGET")]
    assert named and ("cost cap" in named[-1].message if limit == "cost_cap" else "token budget" in named[-1].message), named
    assert len(server.requests) == stop.turns  # the call past the limit was never sent
    assert tree(ws) == {"app.py": b"A = 1\n"}
    return events


@pytest.mark.parametrize("limit", sorted(LIMITS))
@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_unusable_usage_is_refused_and_the_limits_stay_armed(protocol, bad, limit, server, tmp_path):
    await _hosted(protocol, BAD[bad], limit, server, tmp_path, lambda body: start_run(body, RunLayout.create(tmp_path / "runs")))


@pytest.mark.parametrize("bad", ["negative", "beyond_floats"])
async def test_over_rest_the_meter_stays_armed_too(bad, server, tmp_path, jp_fetch, jp_serverapp):
    import json

    manager = jp_serverapp.web_app.settings[STATE_KEY].manager
    events = await _hosted("anthropic", BAD[bad], "cost_cap", server, tmp_path, manager.start_body)
    run_id = events[0].run_id
    listed = json.loads((await jp_fetch("besser-agent", "runs", run_id)).body)["run"]
    assert listed["status"] == "completed"


@pytest.mark.parametrize("bad", sorted(BAD))
def test_the_meter_itself_refuses_what_any_provider_hands_it(bad):
    """A scripted turn (host-authored, no endpoint) reaches the same checks: the meter owns them."""
    from kernel_ext.providers.messages import Conversation
    from kernel_ext.providers.scripted import Script, ScriptedProvider, Turn

    meter = CostMeter()
    meter.add("gpt-4o-mini", Usage(10, 10))
    before = (meter.usage.total_tokens, meter.cost_usd)
    cost, total = meter.add("gpt-4o-mini", Usage(BAD[bad], BAD[bad], BAD[bad], BAD[bad]))
    assert (meter.usage.total_tokens, meter.cost_usd) == before and total == before[1] and cost == 0
    assert len(meter.take_problems()) == 4 and meter.take_problems() == []

    scripted = ScriptedProvider(Script.of("liar", [Turn("hello", usage=Usage(BAD[bad], 5))]), meter=CostMeter())
    conversation = Conversation(system="s")
    conversation.user("hi")
    reply = asyncio.run(scripted.complete(conversation))
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens >= 5  # an estimate stands in, never a negative
    assert scripted.meter.take_problems() and scripted.meter.usage == reply.usage
