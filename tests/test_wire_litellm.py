"""Whole runs through LiteLLM's proxy (1.108.7), a server this project did not write, in both
wire formats: Chat Completions (``%besser generate`` in a real kernel) and the Anthropic-format
``/v1/messages`` (``python -m kernel_ext generate --provider anthropic``). The proxy stands in
front of the project's scripted loopback upstream (tests/wire_turns.py); one proxy serves the
module. A run streams text, several calls in one turn and usage, survives a 429 with
Retry-After, and ends as documented on a context overflow (``CONTEXT_TOO_LONG``) and on a stream
cut inside a call (``UPSTREAM_LLM``, no call executed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import wire_turns
from kernel_driver import KernelDriver
from litellm_proxy import ANTHROPIC_MODEL, OPENAI_MODEL, UPSTREAM_KEY, litellm_absent, litellm_proxy
from provider_server import PROVIDER_ENV, ProviderServer

from kernel_ext.errors import ErrorCode
from kernel_ext.providers import Conversation, ProviderError
from kernel_ext.providers.anthropic import AnthropicProvider
from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.providers.retry import RetryPolicy

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
FAST = RetryPolicy(base_delay=0.01, max_delay=0.02, jitter=False)


@pytest.fixture(scope="module")
def upstream():
    instance = ProviderServer().start()
    try:
        yield instance
    finally:
        instance.stop()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, upstream):
    reason = litellm_absent()
    if reason:
        pytest.skip(reason)
    with litellm_proxy(tmp_path_factory.mktemp("litellm"), upstream.url) as running:
        yield running


@pytest.fixture
def fresh(upstream):
    """The upstream with no plan left over and no request seen."""
    upstream.plans.clear()
    upstream.requests.clear()
    return upstream


def environment(fmt: str, proxy) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
    if fmt == "openai":
        env.update(OPENAI_BASE_URL=proxy.url + "/v1", OPENAI_API_KEY=proxy.key, BESSER_LLM_MODEL=OPENAI_MODEL)
    else:
        env.update(ANTHROPIC_BASE_URL=proxy.url, ANTHROPIC_API_KEY=proxy.key, BESSER_LLM_MODEL=ANTHROPIC_MODEL)
    return env


def cli_run(tmp_path: Path, fmt: str, proxy) -> tuple[int, list[dict], Path]:
    """``python -m kernel_ext generate`` through the proxy: exit code, the run's events, its folder."""
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "kernel_ext", "generate", "example:library", wire_turns.REQUEST, "--provider", fmt,
         "--generator", "fastapi_backend", "--approve", "all", "--out", str(out)],
        env=environment(fmt, proxy), cwd=tmp_path, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    events_file = out / "events.jsonl"
    assert events_file.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return done.returncode, [json.loads(line) for line in events_file.read_text().splitlines()], out


def upstream_saw_the_run(upstream) -> None:
    """The 429'd request was sent again, whole; the tool results of real calls went back."""
    bodies = [s.body for s in upstream.requests]
    assert len(bodies) == 5 and bodies[0] == bodies[1]  # the 429, then the same request again
    assert all(s.headers["authorization"] == f"Bearer {UPSTREAM_KEY}" for s in upstream.requests)
    results = wire_turns.tool_results(upstream.requests)
    assert [r.split(" (")[0] for r in results] == ["created backend/greeting.py", "created backend/farewell.py",
                                                    "T1 implemented"], results


def assert_files_written(app: Path) -> None:
    for path, content in wire_turns.FILES.items():
        assert (app / path).read_text() == content


async def test_a_whole_besser_generate_in_a_kernel_through_the_proxys_chat_completions(tmp_path, proxy, fresh):
    fresh.plan(*wire_turns.whole_run())
    kernel = await KernelDriver.start(tmp_path, environment("openai", proxy))
    try:
        await kernel.execute("%load_ext kernel_ext")
        await kernel.execute("from kernel_ext.model.examples import build_library_model\nlibrary = build_library_model()")
        await kernel.execute(f"view = %besser generate library {wire_turns.REQUEST!r} --provider openai "
                             "--target fastapi_backend --approve all\ndisplay(view)")
        await kernel.wait_for("view.state.finished", "True", timeout=540)
        values = await kernel.execute("", status="view.state.status", run_dir="view.state.run_dir")
    finally:
        await kernel.stop()
    assert values["status"] == "'completed'", values
    run_dir = Path(values["run_dir"].strip("'"))
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    texts = " ".join(e.get("text", "") for e in events if e["type"] == "text")
    assert "I will write both modules." in texts and "Both modules are written." in texts
    cost = [e for e in events if e["type"] == "cost"][-1]
    assert cost["input_tokens"] == 4 * 1500 and cost["output_tokens"] == 4 * 120 and cost["cost_usd"] > 0
    writes = [e for e in events if e["type"] == "tool_result" and e["name"] == "write_file"]
    assert len(writes) == 2 and all(e["ok"] for e in writes)
    assert_files_written(run_dir / "app")
    upstream_saw_the_run(fresh)


def test_a_whole_cli_run_through_the_proxys_anthropic_messages(tmp_path, proxy, fresh):
    fresh.plan(*wire_turns.whole_run())
    code, events, out = cli_run(tmp_path, "anthropic", proxy)
    assert code == 0 and events[-1]["type"] == "done" and events[-1]["status"] == "completed", events[-3:]
    texts = " ".join(e.get("text", "") for e in events if e["type"] == "text")
    assert "I will write both modules." in texts and "Both modules are written." in texts
    cost = [e for e in events if e["type"] == "cost"][-1]
    assert cost["input_tokens"] == 4 * 1500 and cost["output_tokens"] == 4 * 120
    assert_files_written(out / "app")
    upstream_saw_the_run(fresh)
    # the proxy translated Anthropic's tool_use / tool_result blocks into Chat Completions for the upstream
    assert fresh.requests[-1].body["messages"][0]["role"] == "system"


@pytest.mark.parametrize("fmt", ["openai"])  # /v1/messages: the same error, read directly below
def test_a_context_overflow_ends_the_run_with_context_too_long(tmp_path, proxy, fresh, fmt):
    fresh.plan(*wire_turns.context_overflow_run())
    code, events, _ = cli_run(tmp_path, fmt, proxy)
    errors = [e for e in events if e["type"] == "error" and e["code"] == "CONTEXT_TOO_LONG"]
    assert len(errors) == 1 and errors[0]["terminal"] and "context window; no retry" in errors[0]["message"]
    assert code != 0 and events[-1]["type"] == "done" and events[-1]["status"] != "completed"
    assert ("customize", "failed") in {(e["phase"], e["status"]) for e in events if e["type"] == "phase"}
    assert ("validate", "done") in {(e["phase"], e["status"]) for e in events if e["type"] == "phase"}
    assert len(fresh.requests) == 2  # no retry of a request that cannot fit


@pytest.mark.parametrize("fmt", ["anthropic"])  # Chat Completions: the same ending, read directly below
def test_a_stream_cut_inside_a_call_ends_the_run_and_runs_no_call(tmp_path, proxy, fresh, fmt):
    fresh.plan(*wire_turns.cut_run())
    code, events, out = cli_run(tmp_path, fmt, proxy)
    errors = [e for e in events if e["type"] == "error" and e.get("terminal")]
    assert [e["code"] for e in errors] == ["UPSTREAM_LLM"] and "mid-stream" in errors[0]["message"]
    assert not any(e["type"] == "tool_result" and e["name"] == "write_file" for e in events)
    assert not any((out / "app" / path).exists() for path in wire_turns.FILES)
    assert code != 0 and events[-1]["status"] != "completed"


def client(fmt: str, proxy) -> OpenAICompatProvider | AnthropicProvider:
    if fmt == "openai":
        return OpenAICompatProvider(model=OPENAI_MODEL, base_url=proxy.url + "/v1", api_key=proxy.key, retry=FAST)
    return AnthropicProvider(model=ANTHROPIC_MODEL, base_url=proxy.url, api_key=proxy.key, retry=FAST)


async def one_call(fmt: str, proxy):
    conversation = Conversation(system="s")
    conversation.user("write both")
    provider = client(fmt, proxy)
    try:
        return await provider.complete(conversation)
    finally:
        await provider.aclose()


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_the_clients_read_the_live_proxy_directly(proxy, fresh, fmt):
    """One call per client, no run around it: what the fixtures in tests/data/wire/ record."""
    fresh.plan(wire_turns.write_both())
    reply = await one_call(fmt, proxy)
    assert reply.text == "I will write both modules." and reply.stop_reason == "tool_use"
    assert [json.loads(c.arguments)["path"] for c in reply.tool_calls] == list(wire_turns.FILES)
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (1500, 120)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize(("case", "code"), [("context", ErrorCode.CONTEXT_TOO_LONG), ("cut", ErrorCode.UPSTREAM_LLM)])
async def test_the_live_proxys_failures_end_a_call_as_documented(proxy, fresh, fmt, case, code):
    fresh.plan(*(wire_turns.context_overflow_run() if case == "context" else wire_turns.cut_run())[1:])
    with pytest.raises(ProviderError) as caught:
        await one_call(fmt, proxy)
    assert caught.value.code == code and len(fresh.requests) == 1
