# ruff: noqa: F811 - fixtures imported from jupyter_fixtures / provider_server are requested by name
"""A run's secret stays out of everything, also in pieces, and cannot be approved into the app.

Red-team findings (verified): an endpoint that echoed the key without its ``sk-`` prefix, a
17-character piece of it, or the key spelled out with spaces got it into ``events.jsonl`` and
the CLI's output; and a ``write_file`` whose path was the key (``[redacted].py`` on the card) or
whose content held it ``\\u``-escaped was approved and written to ``app/``, its snapshots and
``run.json``. Now ``kernel_ext.secrets`` cuts any run of 12+ characters of a known secret
(whitespace between them too), and the boundary refuses a call carrying one
(``SECRET_IN_ARGUMENTS``) before policy and approval.

Driven by the real loopback endpoint (tests/provider_server.py, OpenAI and Anthropic streaming)
through the CLI (a child process), the Python API and REST on a real Jupyter server, each with
edits auto-approved, so only the boundary stands between the key and the disk. Each asserts no
12-character piece of the key in any file of the run or the CLI's output, both calls refused by
name, and nothing written outside the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest
from jupyter_fixtures import (  # noqa: F401
    async_client,
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    runs_dir,
)
from misbehaving_endpoint import KEY, REQUEST, done_replies, endpoint_env, reply, tasks_call
from provider_server import Plan, loopback_only, server  # noqa: F401

from kernel_ext.boundary import ApprovalPolicy, ExecutionPolicy, Executor, ToolCall
from kernel_ext.errors import ErrorCode
from kernel_ext.secrets import FRAGMENT_CHARS, REDACTED, matcher, redact, redact_text
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("fresh_secret_matchers")  # each case builds its own matcher
PIECES = [KEY[i : i + FRAGMENT_CHARS] for i in range(len(KEY) - FRAGMENT_CHARS + 1)]
ESCAPED = "".join(f"\\u{ord(c):04x}" for c in KEY)  # the key as JSON \u-escapes: no plain piece of it


def echoes(protocol: str) -> list[Plan]:
    """Plan, then echo the key in pieces and ask to write it twice, then claim to be done."""
    said = f"Using {KEY[3:]} now; a piece: {KEY[5:22]}; spelled out: {' '.join(KEY)}; split:\n{KEY[:20]}\n{KEY[20:]}"
    return [
        Plan(chunks=list(reply(protocol, call=tasks_call("Add an isbn field to Book")))),
        Plan(chunks=list(reply(protocol, [said], call=("write_file", [json.dumps({"path": f"{KEY[3:]}.py", "content": "V = 1\n"})])))),
        Plan(chunks=list(reply(protocol, call=("write_file", ['{"path": "settings.py", "content": "K = \'' + ESCAPED + '\'\\n"}'])))),
        *done_replies(protocol, 4),
    ]


def assert_no_piece(text: str | bytes, where: str) -> None:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    for piece in PIECES:
        assert piece.encode() not in data, f"{where} holds {piece!r}"
    assert ESCAPED[:60].encode() not in data, f"{where} holds the \\u-escaped key"


def check_run(run_dir: Path) -> None:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "done"
    refused = [e for e in events if e["type"] == "tool_result" and e["name"] == "write_file"]
    assert [e["error_code"] for e in refused] == [ErrorCode.SECRET_IN_ARGUMENTS] * 2, refused
    assert not [e for e in events if e["type"] == "approval_requested" and e["name"] == "write_file"]
    assert any(REDACTED in e.get("text", "") for e in events if e["type"] == "text")  # the echo was there, cut
    for path in run_dir.rglob("*"):
        assert_no_piece(path.name, f"the name {path}")
        if path.is_file() and not path.is_symlink():
            assert_no_piece(path.read_bytes(), str(path))
    assert not (run_dir / "app" / "settings.py").exists()


# -- the owner: what is cut ---------------------------------------------------------------------

SECRET = "Zq8mW3nT7xVb2Lp9Hk4cR1yA"  # shaped like no known key format: only the known-value rule cuts it


@pytest.mark.parametrize("text", [
    pytest.param(SECRET, id="whole"),
    pytest.param(f"echo {SECRET[3:]} end", id="prefix-dropped"),
    pytest.param(f"x{SECRET[5:22]}y", id="17-char-piece"),
    pytest.param(f"[{SECRET[7:19]}]", id="12-char-piece"),
    pytest.param(" ".join(SECRET), id="spaced"),
    pytest.param(f"{SECRET[:10]}\n  {SECRET[10:]}", id="split-over-lines"),
    pytest.param(SECRET * 3, id="repeated"),
    pytest.param(f"é{SECRET[2:]}ü", id="between-non-ascii"),
    pytest.param(f"\udc80{SECRET}\ud800", id="between-lone-surrogates"),
])
def test_every_run_of_twelve_characters_is_cut(text):
    cut = redact_text(text, (SECRET,))
    assert REDACTED in cut
    for piece in (SECRET[i : i + FRAGMENT_CHARS] for i in range(len(SECRET) - FRAGMENT_CHARS + 1)):
        assert piece not in cut.replace(" ", "").replace("\n", "")
    assert matcher((SECRET,)).found(text)


def test_what_is_not_a_piece_stays():
    text = f"short {SECRET[:11]} and {SECRET[-11:]}, words stay: the app reads os.environ['KEY']"
    assert redact_text(text, (SECRET,)) == text  # under 12 characters: no run of the key
    assert redact_text("pw=hunter2! ok", ("hunter2!",)) == "pw=[redacted] ok"  # a short secret is cut whole
    assert redact({SECRET[2:]: SECRET[:-2]}, (SECRET,)) == {REDACTED: REDACTED}  # keys and values alike


def test_a_text_made_of_pieces_is_withheld_whole():
    text = "!".join([SECRET[4:17]] * 3000)
    cut = redact_text(text, (SECRET,))
    assert cut.startswith(REDACTED) and SECRET[4:16] not in cut and len(cut) < 200


# -- the boundary: a call carrying a secret is refused by name ----------------------------------

ARGUMENT_SHAPES = [
    pytest.param("write_file", {"path": f"{SECRET}.py", "content": "x = 1\n"}, id="path-is-the-key"),
    pytest.param("write_file", {"path": "a.py", "content": f"K = '{SECRET[2:]}'\n"}, id="content-holds-a-piece"),
    pytest.param("write_file", '{"path": "a.py", "content": "K = \'' + "".join(f"\\u{ord(c):04x}" for c in SECRET) + '\'"}',
                 id="content-u-escaped"),
    pytest.param("write_file", {"path": "a.py", "content": " ".join(SECRET)}, id="content-spaced"),
    pytest.param("write_file", {"path": "a.py", "content": "x", SECRET: "v"}, id="argument-name-is-the-key"),
    pytest.param("test_api", {"requests": [{"method": "GET", "path": "/", "headers": {f"X-{SECRET}": "v"}}]}, id="nested-key"),
    pytest.param("unknown_arguments", "{" + f'"path": "{SECRET}.py"', id="not-even-json"),
]


@pytest.mark.parametrize(("name", "arguments"), ARGUMENT_SHAPES)
def test_the_boundary_refuses_a_secret_before_policy_and_approval(tmp_path, name, arguments):
    asked: list = []
    tool = "write_file" if name == "unknown_arguments" else name
    executor = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(tmp_path)}),
                        policy=ExecutionPolicy.allowing(["read", "edit", "test"]), approvals=ApprovalPolicy(),
                        approver=lambda request: asked.append(request) or True, known_secrets=(SECRET,))
    result = executor.execute_sync(ToolCall("c1", tool, arguments))
    assert not result.ok and result.error.code == ErrorCode.SECRET_IN_ARGUMENTS
    assert asked == [] and list(tmp_path.iterdir()) == []  # never shown for approval, nothing written
    assert_no_piece_of(SECRET, result.observation + json.dumps(result.data))


def test_a_call_without_a_secret_still_runs(tmp_path):
    executor = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(tmp_path)}),
                        policy=ExecutionPolicy.allowing(["edit"]), approver=lambda request: True, known_secrets=(SECRET,))
    result = executor.execute_sync(ToolCall("c1", "write_file", {"path": "a.py", "content": f"K = '{SECRET[:11]}'\n"}))
    assert result.ok, result.observation
    assert (tmp_path / "a.py").read_text() == f"K = '{SECRET[:11]}'\n"


def assert_no_piece_of(secret: str, text: str) -> None:
    for i in range(len(secret) - FRAGMENT_CHARS + 1):
        assert secret[i : i + FRAGMENT_CHARS] not in text


# -- entry points: CLI, Python API, REST ---------------------------------------------------------


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_cli_keeps_every_piece_of_the_key_out(server, tmp_path, protocol):
    import subprocess

    server.plan(*echoes(protocol))
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "BESSER_LLM_"))}
    out = tmp_path / "cli"
    out.mkdir()
    completed = subprocess.run(
        [sys.executable, "-m", "kernel_ext", "generate", "example:library", REQUEST, "--generator", "pydantic",
         "--provider", protocol, "--approve", "edits", "--out", str(tmp_path / "run")],
        cwd=out, env={**keep, "PYTHONPATH": str(ROOT), **endpoint_env(server, protocol)}, capture_output=True, timeout=120, check=False,
    )
    assert completed.returncode in (0, 1), completed.stderr.decode(errors="replace")
    assert_no_piece(completed.stdout, "CLI stdout")
    assert_no_piece(completed.stderr, "CLI stderr")
    check_run(tmp_path / "run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli", "run"] and list(out.iterdir()) == []


async def test_python_api_keeps_every_piece_of_the_key_out(server, tmp_path, monkeypatch):
    from kernel_ext.pipeline.generation import generate

    for name, value in endpoint_env(server, "openai").items():
        monkeypatch.setenv(name, value)
    server.plan(*echoes("openai"))
    asked: list = []
    run = generate("example:library", REQUEST, run_dir=tmp_path / "run", provider="openai", target="pydantic",
                   approver=lambda request: asked.append(request) or True)
    await asyncio.wait_for(run.wait(), 120)
    check_run(tmp_path / "run")
    assert not [r for r in asked if r.name == "write_file"]
    assert_no_piece(json.dumps([e.model_dump(mode="json") for e in run.events.events]), "the events in memory")
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


async def test_rest_keeps_every_piece_of_the_key_out(server, jp_fetch, jp_serverapp, runs_dir, monkeypatch):
    for name, value in endpoint_env(server, "openai").items():
        monkeypatch.setenv(name, value)  # set after the server started: the run learns the key from its provider
    server.plan(*echoes("openai"))
    body = {"kind": "generate", "request": REQUEST, "model_path": "example:library", "target": "pydantic",
            "provider": "openai", "approve": "edits"}
    started = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    run_id = json.loads(started.body)["run"]["id"]
    async with async_client(jp_serverapp) as client:
        deadline = time.monotonic() + 120
        while (await client.get(f"runs/{run_id}")).json()["run"]["live"] and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        stream = (await client.get(f"runs/{run_id}/events")).text
    assert "secret_in_arguments" in stream
    assert_no_piece(stream, "the SSE stream")
    check_run(runs_dir / run_id)
    assert [p.name for p in runs_dir.iterdir()] == [run_id]
