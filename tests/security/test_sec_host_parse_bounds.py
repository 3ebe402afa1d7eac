"""What the host parses of untrusted text is bounded in size and depth, with a named refusal.

The class: a workspace file (or a sandboxed process's reply) that the host parses itself.
Python source costs the host ~250 bytes of memory per byte in the worst shape (a 6 MB
``x=1+1+...`` took 1.4 GB), so over ``pyparse.MAX_SOURCE_BYTES`` (1 MiB) ``check_syntax`` and
the edit gate refuse ``too_large`` without parsing. JSON nested two megabytes deep made
``json.loads`` raise ``RecursionError`` (``internal_error``); every reader of untrusted JSON goes
through ``kernel_ext.safejson``, so it is a named refusal. Driven through the Python API (the
Executor), the ``tool`` and ``calls`` CLIs (whose peak memory is measured: a bound, not a time),
and each JSON reader directly; nothing outside the run changes, and refused edits write nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kernel_ext import pyparse
from kernel_ext.model.jsonform import loads as model_loads
from kernel_ext.sandbox.frames import FrameError, decode_body
from kernel_ext.server.handlers.base import Refusal, parse_json_body
from kernel_ext.validation.apphost.exchange import parse_body
from kernel_ext.validation.references import MISSING

from .world import call, file_executor

REPO = Path(__file__).resolve().parents[2]
BIG_PYTHON = "x = 1" + "+1" * (3 * 1024 * 1024) + "\n"  # 6 MB: under the 8 MB read cap, over the parse cap
DEEP_JSON = "[" * (1024 * 1024) + "]" * (1024 * 1024)  # 2 MB
MAX_CLI_RSS_KB = 400 * 1024  # the refusal must come before the parse (which took 1.4 GB)


_MEASURE = ("import os, subprocess, sys; p = subprocess.Popen(sys.argv[2:]); _, s, u = os.wait4(p.pid, 0); "
            "open(sys.argv[1], 'w').write(str(u.ru_maxrss))")


def _cli(kind: str, ws: Path, name: str, arguments: dict) -> tuple[dict, int]:
    """One CLI process; returns its answer and its peak resident memory (KB, from ``wait4``)."""
    common = ["--workspace", str(ws), "--allow", "edit", "--approve", "yes"]
    if kind == "tool":
        argv, stdin = [sys.executable, "-m", "kernel_ext", "tool", *common, name, json.dumps(arguments)], ""
    else:
        argv, stdin = [sys.executable, "-m", "kernel_ext", "calls", *common, "-"], json.dumps([{"name": name, "arguments": arguments}])
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as peak:
        # Started by a small fresh interpreter, so the CLI's peak is its own: a child forked straight
        # from this test process would count the test process's pages (hundreds of MB late in a suite).
        measured = [sys.executable, "-c", _MEASURE, peak.name, *argv]
        proc = subprocess.Popen(measured, cwd=REPO, stdin=subprocess.PIPE, stdout=out, stderr=err, text=True)
        proc.stdin.write(stdin)
        proc.stdin.close()
        proc.wait()
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
        max_rss = int(peak.read().strip() or 0)
    assert "Traceback" not in stderr, stderr[-2000:]
    answer = json.loads(stdout)
    answer = answer[0] if isinstance(answer, list) else answer
    error = answer.get("error") or {}
    return {"ok": answer["ok"], "code": error.get("code"), "observation": answer["observation"],
            "data": error.get("data") or answer.get("data") or {}}, max_rss


def _api(ws: Path, name: str, arguments: dict) -> tuple[dict, int | None]:
    result = call(file_executor(ws), name, **arguments)
    data = dict(result.data)
    return {"ok": result.ok, "code": result.error.code if result.error else None, "observation": result.observation,
            "data": data}, None


ENTRIES = {"api": _api, "tool": lambda *a: _cli("tool", *a), "calls": lambda *a: _cli("calls", *a)}


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("case", ["python_over_the_parse_cap", "json_nested_two_megabytes_deep"])
def test_check_syntax_refuses_what_it_will_not_parse_by_name(world, entry, case):
    ws = world.ws
    name, text, reason = ("big.py", BIG_PYTHON, "too_large") if case.startswith("python") else ("deep.json", DEEP_JSON, "json_too_deep")
    (ws / name).write_text(text)
    before = sorted(p.name for p in ws.iterdir())
    outcome, peak_kb = ENTRIES[entry](ws, "check_syntax", {"path": name})
    assert not outcome["ok"] and outcome["code"] == "too_large", outcome
    assert outcome["data"].get("reason") == reason, outcome
    assert "internal" not in outcome["observation"].lower() and "RecursionError" not in outcome["observation"]
    if peak_kb is not None:
        assert peak_kb < MAX_CLI_RSS_KB, f"the CLI peaked at {peak_kb // 1024} MB"
    assert sorted(p.name for p in ws.iterdir()) == before and (ws / name).read_text() == text
    assert world.unchanged()


@pytest.mark.parametrize("entry", ["api", "calls"])
def test_an_edit_making_python_too_large_to_check_writes_nothing(world, entry):
    ws = world.ws
    (ws / "ok.py").write_text("a = 1\n")
    content = "x = 1" + "+1" * (pyparse.MAX_SOURCE_BYTES // 2) + "\n"  # just over 1 MiB, under the argument cap
    drive = ENTRIES[entry]
    created, _ = drive(ws, "write_file", {"path": "big.py", "content": content})
    edited, _ = drive(ws, "modify_file", {"path": "ok.py", "old_text": "a = 1", "new_text": content.strip()})
    for outcome in (created, edited):
        assert not outcome["ok"] and outcome["code"] == "too_large", outcome
        assert "Nothing was written" in outcome["observation"]
    assert not (ws / "big.py").exists() and (ws / "ok.py").read_text() == "a = 1\n"
    assert world.unchanged()


def _reader_refuses(reader: str, text: str) -> str:
    """What each reader of untrusted JSON makes of ``text``: a named outcome, never an escape."""
    if reader == "rest_body":
        with pytest.raises(Refusal) as refused:
            parse_json_body(text.encode())
        return refused.value.code
    if reader == "app_response_body":
        value, kept = parse_body(text.encode(), "application/json")
        assert value is MISSING and kept  # shown as text, not parsed
        return "kept_as_text"
    if reader == "sandbox_frame":
        with pytest.raises(FrameError) as refused:
            decode_body(text.encode())
        return "frame_error" if "nest" in str(refused.value) else str(refused.value)
    if reader == "model_file":
        from kernel_ext.errors import ToolFailure

        with pytest.raises(ToolFailure) as refused:
            model_loads(text)
        return refused.value.code
    raise AssertionError(reader)


READERS = {"rest_body": "JSON_TOO_DEEP", "app_response_body": "kept_as_text", "sandbox_frame": "frame_error",
           "model_file": "not_a_model"}


@pytest.mark.parametrize("depth", [300, 1024 * 1024], ids=["past_the_bound", "past_the_parser"])
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_of_untrusted_json_names_deep_nesting(reader, depth):
    assert _reader_refuses(reader, "[" * depth + "]" * depth) == READERS[reader]
