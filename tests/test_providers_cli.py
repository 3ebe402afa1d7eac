"""``python -m kernel_ext providers check`` in a real subprocess against a loopback server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from provider_server import PROVIDER_ENV, Plan, anthropic_stream, json_error, loopback_only, openai_stream, server  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
OPENAI_KEY = "sk-test-Ws6Fj2Nd9Kc4Vq7Hm3Rb8Tx5"
ANTHROPIC_KEY = "sk-ant-api03-Pd7Lx2Gk9Wn4Cz6Vr3Jm8Qs1"


def check(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
    return subprocess.run(
        [sys.executable, "-m", "kernel_ext", "providers", "check", *args],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_openai_compatible_answers(server):
    server.plan(Plan(chunks=openai_stream(["ok"], finish="stop", usage={"prompt_tokens": 12, "completion_tokens": 1})))
    done = check({"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": server.url + "/v1"})
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "provider: openai (inferred from the keys set)" in out
    assert "model: gpt-4o-mini (default)" in out
    assert f"endpoint: {server.url}/v1 (OPENAI_BASE_URL)" in out
    assert "key: set (OPENAI_API_KEY)" in out and "answered: yes" in out and "reply: 'ok'" in out
    assert "cost: $0.0000" in out
    assert OPENAI_KEY not in out + done.stderr
    body = server.requests[0].body  # one minimal request
    assert len(server.requests) == 1 and body["messages"] == [{"role": "user", "content": "Reply with the single word: ok"}]
    assert body["max_tokens"] == 16


def test_check_rejected_key_prints_INVALID_KEY_and_fails(server):
    server.require_key("openai", "sk-the-right-one-000000000000")
    done = check({"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": server.url + "/v1", "BESSER_LLM_MODEL": "gpt-4.1-mini"})
    assert done.returncode == 1
    assert "model: gpt-4.1-mini (BESSER_LLM_MODEL)" in done.stdout
    assert "answered: no" in done.stdout and "error: INVALID_KEY:" in done.stdout and "HTTP 401" in done.stdout
    assert OPENAI_KEY not in done.stdout + done.stderr and OPENAI_KEY[8:20] not in done.stdout + done.stderr


def test_check_anthropic_selected_by_argument(server, tmp_path):
    server.plan(Plan(chunks=anthropic_stream(["ok"], stop_reason="end_turn", usage_in={"input_tokens": 14}, output_tokens=2)))
    cassette = tmp_path / "check.jsonl"
    env = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": server.url, "OPENAI_API_KEY": OPENAI_KEY}
    done = check(env, "--provider", "anthropic", "--model", "claude-haiku-4-5", "--record", str(cassette))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "provider: anthropic (argument)" in done.stdout and "model: claude-haiku-4-5 (argument)" in done.stdout
    assert server.requests[0].path == "/v1/messages" and server.requests[0].body["max_tokens"] == 16
    recorded = cassette.read_text()
    assert len(recorded.splitlines()) == 2 and ANTHROPIC_KEY not in recorded and OPENAI_KEY not in recorded


def test_check_upstream_failure_has_its_code(server):
    server.plan(json_error(400, {"error": {"message": "model not found", "type": "invalid_request_error"}}))
    done = check({"OPENAI_BASE_URL": server.url + "/v1", "BESSER_LLM_MODEL": "nope"})
    assert done.returncode == 1
    assert "key: not set (OPENAI_API_KEY)" in done.stdout
    assert "error: BAD_REQUEST:" in done.stdout and "model not found" in done.stdout


def test_check_unreachable_endpoint(loopback_only):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = check({"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"})
    assert done.returncode == 1 and "error: UPSTREAM_LLM: could not reach" in done.stdout


def test_check_without_configuration(loopback_only):
    done = check({})
    assert done.returncode == 1
    assert "provider: none" in done.stdout and "error: NOT_CONFIGURED:" in done.stdout
    done = check({"BESSER_LLM_PROVIDER": "openai"})  # the vendor endpoint needs a key: nothing is sent
    assert done.returncode == 1 and "needs OPENAI_API_KEY" in done.stdout


def test_check_replay_reports_without_an_endpoint(loopback_only, tmp_path):
    cassette = tmp_path / "c.jsonl"
    cassette.write_text(json.dumps({"cassette": 1, "recorded_from": {"label": "openai:gpt-4o", "model": "gpt-4o"}}) + "\n")
    done = check({"BESSER_LLM_PROVIDER": "replay", "BESSER_LLM_CASSETTE": str(cassette)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kind: replay (replayed from a recording, not a live model)" in done.stdout


def test_run_options_build_the_provider_they_name(loopback_only, tmp_path):
    import argparse

    from kernel_ext.cli.providers import add_provider_arguments, provider_from_args

    parser = argparse.ArgumentParser()
    add_provider_arguments(parser)
    script = tmp_path / "lesson.json"
    script.write_text(json.dumps({"name": "lesson", "turns": [{"text": "hi"}]}))
    scripted = provider_from_args(parser.parse_args(["--script", str(script), "--max-cost", "0.5"]), env={})
    assert scripted.label == "scripted:lesson" and scripted.meter.cap_usd == 0.5
    cassette = tmp_path / "live.jsonl"
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": OPENAI_KEY}
    live = provider_from_args(parser.parse_args(["--model", "gpt-4.1", "--record", str(cassette)]), env=env)
    assert (live.kind, live.label) == ("live", "openai:gpt-4.1") and live.recorder is not None
    header = json.loads(cassette.read_text().splitlines()[0])  # the header is written at once, keyless
    assert header["recorded_from"]["label"] == "openai:gpt-4.1" and OPENAI_KEY not in cassette.read_text()
