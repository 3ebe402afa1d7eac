"""A spent budget at the endpoint ends the run as ``budget_exhausted``, after one request.

The replies are the ones a classroom gateway sends when a student's key has spent its budget,
played by the real loopback server (tests/provider_server.py). They are copied from the
gateways' own code, since LiteLLM's key store cannot run on this machine (docs/jupyterhub.md,
"The key stays with the hub", says why): LiteLLM 1.108's ``ProxyException`` for a
``BudgetExceededError`` (status ``litellm.budget_exceeded_status_code``: 422 now, 400 before,
429 when the operator sets it; type ``budget_exceeded``; its two wordings of the figures), and
OpenAI's ``insufficient_quota``. Both live providers share the transport, so both are run.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from provider_server import Plan, anthropic_stream, fragments, json_error, loopback_only, openai_stream, server, sse  # noqa: F401

from kernel_ext.errors import ErrorCode
from kernel_ext.providers import Conversation, ProviderError
from kernel_ext.providers.anthropic import AnthropicProvider
from kernel_ext.providers.events import Retrying
from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.providers.quota import budget_figures
from kernel_ext.providers.retry import RetryPolicy

KEY = "sk-student-virtual-Zq8wVn3Lr5Tk2Pj7Hd"
FAST = RetryPolicy(base_delay=0.01, max_delay=0.02, jitter=False)


def litellm(status: int, message: str) -> Plan:
    """LiteLLM's proxy refusing a key over budget (``ProxyException.to_dict`` under ``error``)."""
    return json_error(status, {"error": {"message": message, "type": "budget_exceeded", "param": None, "code": str(status)}})


REFUSALS = {
    "litellm-key-422": (litellm(422, "Budget has been exceeded! Key=besser-alice Current cost: 0.0123, Max budget: 0.01"),
                        0.0123, 0.01),
    "litellm-user-400": (litellm(400, "ExceededBudget: User=alice over budget. Spend=0.5, Budget=0.5"), 0.5, 0.5),
    "litellm-team-429": (litellm(429, "Budget has been exceeded! Team=t1 Current cost: 2.000001, Max budget: 2.0"),
                         2.000001, 2.0),
    "openai-quota-429": (json_error(429, {"error": {"message": "You exceeded your current quota, please check your plan "
                                                    "and billing details.", "type": "insufficient_quota", "param": None,
                                                    "code": "insufficient_quota"}}, {"retry-after": "0"}), None, None),
}
PROVIDERS = {
    "openai": lambda url, **kw: OpenAICompatProvider(model="gpt-4o-mini", base_url=url + "/v1", api_key=KEY, **kw),
    "anthropic": lambda url, **kw: AnthropicProvider(model="claude-sonnet-4-5", base_url=url, api_key=KEY, **kw),
}
FINE = {"openai": lambda: Plan(chunks=openai_stream(["fine"], finish="stop")),
        "anthropic": lambda: Plan(chunks=anthropic_stream(["fine"], stop_reason="end_turn"))}


def conversation() -> Conversation:
    conv = Conversation(system="You are a careful engineer.")
    conv.user("Add a docstring to main.py")
    return conv


async def drain(provider):
    return [e async for e in provider.stream(conversation())]


@pytest.mark.parametrize("protocol", sorted(PROVIDERS))
@pytest.mark.parametrize("refusal", sorted(REFUSALS))
async def test_a_budget_refusal_is_final_after_one_request_and_names_the_figures(server, protocol, refusal):  # noqa: F811
    reply, spent, limit = REFUSALS[refusal]
    server.plan(reply, *[FINE[protocol]() for _ in range(3)])  # a retry would be answered: none may be sent
    provider = PROVIDERS[protocol](server.url, retry=FAST)
    seen: list = []
    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(conversation()):
            seen.append(event)
    assert caught.value.code == ErrorCode.BUDGET_EXHAUSTED
    assert not any(isinstance(e, Retrying) for e in seen) and provider.retries == 0
    assert len(server.requests) == 1
    data = caught.value.data
    assert data.get("spent_usd") == spent and data.get("limit_usd") == limit
    assert "budget of this key is spent" in caught.value.message and KEY not in caught.value.message
    if spent is not None:
        assert f"spent ${spent:g} of ${limit:g}" in caught.value.message

    # every later call of the run is refused at once, without a request
    with pytest.raises(ProviderError) as again:
        await drain(provider)
    await provider.aclose()
    assert again.value.code == ErrorCode.BUDGET_EXHAUSTED and again.value.data["sent"] is False
    assert len(server.requests) == 1


async def test_a_budget_refusal_inside_a_stream_is_final_too(server):  # noqa: F811
    body = {"error": {"message": "Budget has been exceeded! Key=k Current cost: 0.3, Max budget: 0.25",
                      "type": "budget_exceeded", "param": None, "code": "422"}}
    server.plan(Plan(chunks=[*openai_stream(["par"], finish=None, done=False), sse(body)]), FINE["openai"]())
    provider = PROVIDERS["openai"](server.url, retry=FAST)
    with pytest.raises(ProviderError) as caught:
        await drain(provider)
    await provider.aclose()
    assert caught.value.code == ErrorCode.BUDGET_EXHAUSTED
    assert (caught.value.data["spent_usd"], caught.value.data["limit_usd"]) == (0.3, 0.25)
    assert len(server.requests) == 1


async def test_other_refusals_keep_their_codes_and_their_retries(server):  # noqa: F811
    """Only a budget's own type is final: a plain 429 is still retried, a 422 still a bad request."""
    server.plan(json_error(429, {"error": {"message": "Rate limit reached", "type": "requests"}}, {"retry-after": "0"}),
                FINE["openai"](),
                json_error(422, {"error": {"message": "budget is a nice word", "type": "invalid_request_error"}}))
    provider = PROVIDERS["openai"](server.url, retry=FAST)
    events = await drain(provider)
    assert sum(isinstance(e, Retrying) for e in events) == 1
    with pytest.raises(ProviderError) as caught:
        await drain(provider)
    await provider.aclose()
    assert caught.value.code == ErrorCode.BAD_REQUEST and provider.exhausted is None
    assert len(server.requests) == 3


@pytest.mark.parametrize(("kind", "message", "expected"), [
    ("budget_exceeded", "Budget has been exceeded! Current cost: 1e-05, Max budget: 1E-5", {"spent_usd": 1e-05, "limit_usd": 1e-05}),
    ("budget_exceeded", "Budget has been exceeded! Current cost: nan, Max budget: 1", {}),
    ("budget_exceeded", "Budget has been exceeded! Current cost: -3, Max budget: 1", {}),
    ("budget_exceeded", "no figures at all", {}),
    ("insufficient_quota", "Spend=1, Budget=2", {"spent_usd": 1.0, "limit_usd": 2.0}),
    ("rate_limit_exceeded", "Current cost: 1, Max budget: 2", None),
    ("", "Budget has been exceeded! Current cost: 1, Max budget: 2", None),
])
def test_budget_figures_are_read_only_from_a_budget_refusal(kind, message, expected):
    found = budget_figures(kind, message)
    if expected is None:
        assert found is None
    else:
        assert found == {"upstream_type": kind, **expected}


# -- a whole run ------------------------------------------------------------------------------

TASKS = json.dumps({"tasks": ["add a search endpoint for books"]})


def padded_refusal() -> Plan:
    """A 429 with Retry-After whose 20 MiB body puts the type after the padding (issue 28, item 5)."""
    message = "Budget has been exceeded! Key=besser-alice Current cost: 0.0123, Max budget: 0.01 " + "p" * (20 << 20)
    body = json.dumps({"error": {"message": message, "type": "budget_exceeded", "code": "429"}}).encode()
    return Plan(429, [body[i : i + 65536] for i in range(0, len(body), 65536)],
                {"content-type": "application/json", "retry-after": "0"})


@pytest.mark.slow
@pytest.mark.parametrize("refusal", ["litellm-422", "padded-429"])
def test_a_run_whose_key_runs_out_ends_budget_exhausted_with_the_figures(server, monkeypatch, tmp_path, refusal):  # noqa: F811
    """The planning call is answered, the first Phase 2 call is refused for want of budget: the run
    ends ``budget_exhausted`` (Phase 3 still checks the app, with no repair call), the error event
    carries the figures, and the endpoint saw two requests in all, whatever the refusal's size."""
    from kernel_ext.pipeline.generation import generate

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.plan(Plan(chunks=openai_stream([], [("c1", "submit_tasks", fragments(TASKS, 9))])),
                REFUSALS["litellm-key-422"][0] if refusal == "litellm-422" else padded_refusal(),
                *[FINE["openai"]() for _ in range(3)])

    async def go():
        run = generate("example:library", "A FastAPI backend with a book search", run_dir=tmp_path / "run",
                       provider="openai", target="fastapi_backend", approve="all")
        return run, await asyncio.wait_for(run.wait(), 240)

    run, done = asyncio.run(go())
    assert done is not None and done.status == "budget_exhausted", done
    assert done.summary.startswith("http://127.0.0.1") and "spent $0.0123 of $0.01" in done.summary
    errors = [e for e in run.events.events if e.type == "error" and e.code == "BUDGET_EXHAUSTED"]
    assert len(errors) == 1 and (errors[0].spent_usd, errors[0].limit_usd) == (0.0123, 0.01)
    phases = {(e.phase, e.status) for e in run.events.events if e.type == "phase"}
    assert ("customize", "failed") in phases and ("validate", "done") in phases
    assert len(server.requests) == 2
    log = (run.context.layout.run_dir / "events.jsonl").read_text()
    assert KEY not in log and '"status":"budget_exhausted"' in log

    # the run view: ended, with the status and the endpoint's figures in its header
    from widgets.render import header_html
    from widgets.state import RunViewState

    view = RunViewState()
    for event in run.events.events:
        view.apply(event)
    header = header_html(view)
    assert view.finished and view.status == "budget_exhausted"
    assert "budget_exhausted" in header and "BUDGET_EXHAUSTED" in header and "spent $0.0123 of $0.01" in header
