# ruff: noqa: F811 - fixtures imported from provider_server are requested by name
"""A refusal is recognised by its head, however long the error body (issue 28, item 5).

The real loopback server (tests/provider_server.py) answers with a gateway's budget refusal
(LiteLLM's ``budget_exceeded``, OpenAI's ``insufficient_quota``) or an ordinary error, padded to
1 KiB, 64 KiB + 1, 1 MiB and 20 MiB: the padding after the error object, or inside it (a long
``message`` before the ``type``). As 422, 429 with ``Retry-After``, 400 and 402, through both live
providers (they share one transport): a spent budget is ``BUDGET_EXHAUSTED`` after exactly one
request, whatever the size; another error keeps its documented ending (a 429 retried, a 4xx a bad
request). The endpoint's own count of requests is what says "never retried".
"""

from __future__ import annotations

import json
import random

import pytest
from provider_server import Plan, anthropic_stream, loopback_only, openai_stream, rechunk, server, sse  # noqa: F401

from kernel_ext.errors import ErrorCode
from kernel_ext.providers import Conversation, ProviderError
from kernel_ext.providers.anthropic import AnthropicProvider
from kernel_ext.providers.errorhead import ErrorHead, error_fields
from kernel_ext.providers.events import Retrying
from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.providers.retry import RetryPolicy

KEY = "sk-student-virtual-Hd7Lq2Wx9Pz4Rt6Ka"
FAST = RetryPolicy(base_delay=0.01, max_delay=0.02, jitter=False)
SIZES = {"1KiB": 1024, "64KiB+1": 64 * 1024 + 1, "1MiB": 1 << 20, "20MiB": 20 << 20}
BUDGET = {"message": "Budget has been exceeded! Key=besser-alice Current cost: 0.0123, Max budget: 0.01",
          "type": "budget_exceeded", "param": None, "code": "422"}
QUOTA = {"message": "You exceeded your current quota, please check your plan and billing details.",
         "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}
OTHER = {"message": "the request is malformed", "type": "invalid_request_error", "param": None, "code": None}
PROVIDERS = {
    "openai": lambda url: OpenAICompatProvider(model="gpt-4o-mini", base_url=url + "/v1", api_key=KEY, retry=FAST),
    "anthropic": lambda url: AnthropicProvider(model="claude-sonnet-4-5", base_url=url, api_key=KEY, retry=FAST),
}
FINE = {"openai": lambda: Plan(chunks=openai_stream(["fine"], finish="stop")),
        "anthropic": lambda: Plan(chunks=anthropic_stream(["fine"], stop_reason="end_turn"))}


def padded(error: dict, size: int, where: str) -> bytes:
    """The error object in a body of at least ``size`` bytes: padding after it, or inside it, in
    its ``message`` and before its ``type`` (so a reader must pass the padding to find the type)."""
    if where == "after":
        body = json.dumps({"error": error, "padding": "x" * size})
    else:
        inner = {"message": error["message"] + " " + "y" * size, **{k: v for k, v in error.items() if k != "message"}}
        body = json.dumps({"error": inner})
        assert body.index('"type"') > size  # the type comes after the padding
    return body.encode()


def reply(status: int, body: bytes) -> Plan:
    headers = {"content-type": "application/json", **({"retry-after": "0"} if status == 429 else {})}
    return Plan(status, rechunk([body], 64 * 1024), headers)


def conversation() -> Conversation:
    conv = Conversation(system="You are a careful engineer.")
    conv.user("Add a docstring to main.py")
    return conv


async def outcome(provider) -> tuple[list, ProviderError | None]:
    seen: list = []
    try:
        async for event in provider.stream(conversation()):
            seen.append(event)
    except ProviderError as exc:
        return seen, exc
    finally:
        await provider.aclose()
    return seen, None


@pytest.mark.parametrize("protocol", sorted(PROVIDERS))
@pytest.mark.parametrize("status", [422, 429, 400, 402])
@pytest.mark.parametrize("where", ["after", "inside"])
@pytest.mark.parametrize("size", list(SIZES))
async def test_a_spent_budget_is_final_whatever_the_size_of_its_body(server, protocol, status, where, size):
    refusal = BUDGET if status != 402 else QUOTA
    server.plan(reply(status, padded(refusal, SIZES[size], where)), *[FINE[protocol]() for _ in range(3)])
    seen, error = await outcome(PROVIDERS[protocol](server.url))
    assert error is not None and error.code == ErrorCode.BUDGET_EXHAUSTED, error
    assert not any(isinstance(e, Retrying) for e in seen)
    assert len(server.requests) == 1  # the endpoint saw one request: never retried
    assert "budget of this key is spent" in error.message and KEY not in error.message
    if refusal is BUDGET:
        assert (error.data["spent_usd"], error.data["limit_usd"]) == (0.0123, 0.01)
    assert len(error.message) < 1000  # the padding is not carried into the message


@pytest.mark.parametrize("protocol", sorted(PROVIDERS))
@pytest.mark.parametrize("status", [422, 429, 400, 402])
@pytest.mark.parametrize("where", ["after", "inside"])
@pytest.mark.parametrize("size", ["64KiB+1", "20MiB"])
async def test_other_errors_keep_their_documented_endings_whatever_the_size(server, protocol, status, where, size):
    server.plan(reply(status, padded(OTHER, SIZES[size], where)), FINE[protocol]())
    seen, error = await outcome(PROVIDERS[protocol](server.url))
    if status == 429:  # throttled: retried after Retry-After, and the retry is answered
        assert error is None and sum(isinstance(e, Retrying) for e in seen) == 1
        assert len(server.requests) == 2
        return
    assert error is not None and error.code == ErrorCode.BAD_REQUEST, error
    assert error.data["upstream_type"] == "invalid_request_error" and "the request is malformed" in error.message
    assert len(server.requests) == 1


@pytest.mark.parametrize("protocol", sorted(PROVIDERS))
@pytest.mark.parametrize("where", ["after", "inside"])
@pytest.mark.parametrize("size", ["1KiB", "1MiB", "20MiB"])
async def test_a_budget_refusal_inside_a_stream_is_final_whatever_its_size(server, protocol, where, size):
    error_object = json.loads(padded(BUDGET, SIZES[size], where))
    if protocol == "openai":
        chunks = [*openai_stream(["par"], finish=None, done=False), sse(error_object)]
    else:
        chunks = [*anthropic_stream(["par"], stop_reason=None, stop=False), sse({"type": "error", **error_object}, "error")]
    server.plan(Plan(chunks=chunks), FINE[protocol]())
    _seen, error = await outcome(PROVIDERS[protocol](server.url))
    assert error is not None and error.code == ErrorCode.BUDGET_EXHAUSTED, error
    assert (error.data["spent_usd"], error.data["limit_usd"]) == (0.0123, 0.01)
    assert len(server.requests) == 1


def test_a_plain_body_is_its_own_message_and_names_no_type():
    head = ErrorHead()
    head.feed(b"<html><body>502 Bad Gateway</body></html>" + b" " * 100_000)
    assert head.done and head.fields() == ("", "<html><body>502 Bad Gateway</body></html>")


def test_the_head_stops_reading_once_the_error_object_closes():
    head = ErrorHead()
    head.feed(json.dumps({"error": BUDGET}).encode() + b', "padding": "')
    assert head.done and head.fields()[0] == "budget_exceeded"


def _shapes(rng: random.Random, depth: int = 0) -> object:
    """A random JSON value (strings with escapes, numbers, nesting), for the reference check."""
    pick = rng.randrange(8 if depth < 3 else 4)
    if pick == 0:
        return rng.choice([None, True, False, 0, -1.5e3, 429])
    if pick in (1, 2, 3):
        return "".join(rng.choice(['a', '"', "\\", "\u00e9", "\U0001f600", "\n", " ", "\u2028", "/"]) for _ in range(rng.randrange(12)))
    if pick in (4, 5):
        keys = ["type", "code", "message", "detail", "error", "other", "a\"b"]
        return {rng.choice(keys): _shapes(rng, depth + 1) for _ in range(rng.randrange(5))}
    return [_shapes(rng, depth + 1) for _ in range(rng.randrange(4))]


def test_the_scan_agrees_with_a_whole_parse_on_random_bodies_cut_anywhere():
    """For bodies under the kept bounds, scanning in pieces of any size reads what ``json.loads``
    then ``error_fields`` read from the whole body."""
    rng = random.Random(28)
    for _ in range(3000):
        value = _shapes(rng)
        if not isinstance(value, dict):
            value = {"error": value}
        body = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
        head = ErrorHead()
        piece = rng.randrange(1, 9)
        for at in range(0, len(body), piece):
            head.feed(body[at : at + piece])
        assert head.fields() == error_fields(value), body
