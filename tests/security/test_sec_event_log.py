# ruff: noqa: F811 - fixtures imported from jupyter_fixtures / provider_server are requested by name
"""An event log nothing can break: lone surrogates and control characters from the model.

A real loopback endpoint (OpenAI streaming; authored turns, not a live LLM) puts a lone
surrogate, terminal escapes, BEL, NUL-free C0/C1 controls and U+2028 into its planned task,
its text and a tool call's arguments (path and content). Whole pipeline runs through the CLI
(a subprocess), the Python API and REST on a real Jupyter server must end normally (no
``INTERNAL``), with every line of ``events.jsonl`` valid ASCII JSON ending with ``done``, the
SSE stream ending with ``done``, no traceback printed, and the key in no file of the run.
The timeline the CLI prints shows bidi controls (U+202E, U+2066) and line separators (U+2028,
U+0085) as escapes, never raw, also on a UTF-8 terminal, where they could reorder or split it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    parse_sse_text,
    runs_dir,
)
from provider_server import loopback_only, server  # noqa: F401

from .hostile_endpoint import KEY, MODELS, provider, turn

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REQUEST = "A FastAPI backend with a note module"
NASTY = "lone \ud800 surrogate, \u202eevil\u202c \u2066rtl\u2069, \x1b[2J\x1b]0;pwned\x07 escapes, \x85 C1, \u2028 separator, \r\n end"
SPOOFING = "\u2028\u2029\x85\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
TASK = "add a note module " + NASTY


def plans():
    hostile_path = {"path": "backend/note\udfff.py", "content": "X = 1\n"}  # refused by the boundary, by name
    control_content = {"path": "backend/note.py", "content": "NOTE = 'bell \x07 and escape \x1b[31m'\n"}
    return [
        turn("openai", [], [(None, "submit_tasks", {"tasks": [TASK]})]),
        turn("openai", ["I will write it: " + NASTY], [(None, "write_file", hostile_path), ("call_0", "write_file", control_content)]),
        *[turn("openai", ["done " + NASTY]) for _ in range(12)],  # victory refusals, repair rounds
    ]


def check_run_folder(run_dir: Path) -> list[dict]:
    """events.jsonl: every line ASCII JSON, the last ``done``; no INTERNAL end; the key in no file."""
    raw = (run_dir / "events.jsonl").read_bytes()
    assert raw.isascii()
    events = [json.loads(line) for line in raw.decode().splitlines()]
    assert events[-1]["type"] == "done" and events[-1]["status"] in ("completed", "blocked"), events[-1]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert not [e for e in events if e["type"] == "error" and e["code"] == "INTERNAL"], [e for e in events if e["type"] == "error"]
    # the model's own texts (a host note quotes a task, which is one line: its separators are spaces)
    texts = [e["text"] for e in events if e["type"] == "text" and "surrogate" in e["text"] and not e["text"].startswith("[host]")]
    assert texts and all("\ufffd" in t and "\\x1b[2J" in t and "\\x07" in t and "\\x85" in t for t in texts), texts
    for event in events:
        for text in _strings(event):
            assert not any(ord(c) < 32 and c not in "\n\t" for c in text), text
            assert not any(0xD800 <= ord(c) <= 0xDFFF or 0x7F <= ord(c) <= 0x9F for c in text), text
    results = [(e["name"], e["ok"], e["error_code"]) for e in events if e["type"] == "tool_result" and e["name"] == "write_file"]
    assert results[0] == ("write_file", False, "invalid_argument"), results
    assert not list((run_dir / "app" / "backend").glob("note?*.py"))  # the surrogate path wrote nothing
    tasks = [e for e in events if e["type"] == "task_list"]
    assert tasks and "\ufffd" in tasks[0]["tasks"][0]["text"]
    for path in run_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert KEY.encode() not in path.read_bytes(), path
    return events


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_the_python_api_run_ends_normally(server, tmp_path):
    from kernel_ext.pipeline.generation import generate

    server.plan(*plans())

    async def go():
        run = generate("example:library", REQUEST, run_dir=tmp_path / "run", provider=provider("openai", server),
                       target="fastapi_backend", approve="all")
        return run, await asyncio.wait_for(run.wait(), 240)

    run, done = asyncio.run(go())
    assert done is not None
    events = check_run_folder(tmp_path / "run")
    assert len(events) == len(run.events.events) and run.events.persist_error == ""


@pytest.mark.parametrize("encoding", ["ascii", "utf-8"])
def test_the_cli_run_ends_normally_without_a_traceback(encoding, server, tmp_path):
    server.plan(*plans())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "BESSER_LLM_"))}
    env.update(OPENAI_BASE_URL=server.url + "/v1", OPENAI_API_KEY=KEY, BESSER_LLM_MODEL=MODELS["openai"],
               PYTHONPATH=str(ROOT), PYTHONIOENCODING=encoding)  # a terminal that shows only ASCII, or all of Unicode
    out = tmp_path / "cli-run"
    done = subprocess.run(
        [sys.executable, "-m", "kernel_ext", "generate", "example:library", REQUEST, "--provider", "openai",
         "--generator", "fastapi_backend", "--approve", "all", "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=300, check=False,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert "done: " in done.stdout and "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert not [c for c in SPOOFING if c in done.stdout], [hex(ord(c)) for c in SPOOFING if c in done.stdout]
    assert "\\u202e" in done.stdout and "\\u2066" in done.stdout  # shown as escapes: what the model sent stays visible
    check_run_folder(out)


async def test_the_rest_run_ends_normally_and_its_stream_ends_with_done(server, tmp_path, jp_fetch, jp_serverapp, runs_dir, monkeypatch):
    from kernel_ext.model.examples import build_library_model
    from kernel_ext.model.jsonform import model_to_dict
    from kernel_ext.server.handlers.base import STATE_KEY

    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("BESSER_LLM_MODEL", MODELS["openai"])
    server.plan(*plans())
    body = {"kind": "generate", "request": REQUEST, "model_json": model_to_dict(build_library_model()),
            "provider": "openai", "target": "fastapi_backend", "approve": "all"}
    response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    run_id = json.loads(response.body)["run"]["id"]
    run = jp_serverapp.web_app.settings[STATE_KEY].manager.get(run_id)
    streamed = asyncio.ensure_future(jp_fetch("besser-agent", "runs", run_id, "events", request_timeout=300))
    assert await asyncio.wait_for(run.wait(), 240) is not None
    frames = [f for f in parse_sse_text((await asyncio.wait_for(streamed, 60)).body.decode("ascii")) if "data" in f]
    assert frames[-1]["event"] == "done" and [f["data"]["seq"] for f in frames] == list(range(1, len(frames) + 1))
    events = check_run_folder(runs_dir / run_id)
    assert [f["data"] for f in frames] == events  # what followers saw is what the file holds
