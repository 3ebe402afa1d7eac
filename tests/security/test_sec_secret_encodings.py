# ruff: noqa: F811 - fixtures imported from jupyter_fixtures / provider_server are requested by name
"""A run's key stays out of everything also when it is encoded or split, and a cut takes only the key.

Red-team findings (verified): an endpoint answering 400 with the key in its error message got
it into the CLI's output and ``events.jsonl`` as base64, reversed and hex; and the cut of a
prefix-less echo swallowed the next character (``raw-nopfx=[redacted]paced=``). Now
``kernel_ext.secrets`` also cuts, from ``encoded_fragment`` characters on, the key's reversed,
hex, base64 (three alignments, standard and URL-safe) and percent forms, reads past a few
separators (``sk+...``, ``s-k-...``), and a cut ends exactly where the key does.

The forms are derived here on their own (not from ``kernel_ext.secrets.forms``), so a form the
matcher forgot fails. Entry points: the CLI (a child process), the Python API and REST on a real
Jupyter server, against the real loopback endpoint (tests/provider_server.py), which echoes the
key's forms in streamed text, in a refused ``write_file`` and in a 400 error body.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from jupyter_fixtures import (  # noqa: F401
    async_client,
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    runs_dir,
)
from misbehaving_endpoint import KEY, REQUEST, done_replies, endpoint_env, reply, tasks_call
from provider_server import Plan, json_error, loopback_only, server  # noqa: F401

from kernel_ext.boundary import ApprovalPolicy, ExecutionPolicy, Executor, ToolCall
from kernel_ext.errors import ErrorCode
from kernel_ext.secrets import (
    FRAGMENT_CHARS,
    REDACTED,
    encoded_fragment,
    matcher,
    redact_text,
)
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("fresh_secret_matchers")  # each case builds its own matcher
ENCODED = encoded_fragment(FRAGMENT_CHARS)


def b64(data: bytes, urlsafe: bool = False) -> str:
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()


def encodings(key: str) -> dict[str, str]:
    """Ways an endpoint (or a model) writes ``key`` back, each a string holding it."""
    raw = key.encode()
    return {
        "base64": b64(raw),
        "base64-unpadded": b64(raw).rstrip("="),
        "base64-after-1-byte": b64(b"x" + raw),
        "base64-after-2-bytes": b64(b"xy" + raw),
        "base64-urlsafe": b64(b"\xfb\xff" + raw, urlsafe=True),
        "base64-of-a-piece": b64(raw[3:30]),
        "reversed": key[::-1],
        "hex": raw.hex(),
        "hex-upper": raw.hex().upper(),
        "hex-piece": raw[5:25].hex(),
        "percent": quote(key, safe=""),
        "pieces-of-11-joined-by-plus": "+".join(key[i : i + 11] for i in range(0, len(key), 11)),
        "dash-between-characters": "-".join(key),
        "quoted-pieces": ", ".join(f'"{key[i : i + 6]}"' for i in range(0, len(key), 6)),
    }


def pieces(key: str) -> set[bytes]:
    """Every run the files must not hold: 12 of the key or reversed, 16 of an encoded form."""
    raw = key.encode()
    found: set[bytes] = set()
    plain = [raw, raw[::-1]]
    coded = [raw.hex().encode(), raw.hex().upper().encode(), quote(key, safe="").encode()]
    for skip in range(3):
        coded += [base64.b64encode(raw[skip:]).rstrip(b"="), base64.urlsafe_b64encode(raw[skip:]).rstrip(b"=")]
    for forms, size in ((plain, FRAGMENT_CHARS), (coded, ENCODED)):
        for form in forms:
            inner = form if form in plain else form[:-3]  # an encoding's last group depends on what follows
            found.update(inner[i : i + size] for i in range(len(inner) - size + 1))
    return found


def assert_no_form(text: str | bytes, where: str, key: str = KEY) -> None:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    for piece in pieces(key):
        assert piece not in data, f"{where} holds {piece!r}"


# -- the owner: every form is cut, nothing else is -----------------------------------------------

SECRET = "Zq8mW3nT/7xVb2Lp9+Hk4cR1yA=="  # percent-encoding differs; no known key shape


@pytest.mark.parametrize("name", list(encodings(SECRET)))
def test_every_encoded_form_is_cut_and_refused(name, tmp_path):
    text = f"echo: {encodings(SECRET)[name]} (end)"
    cut = redact_text(text, (SECRET,))
    assert REDACTED in cut and cut.startswith("echo: ") and cut.endswith(" (end)")
    assert_no_form(cut, "the cut text", SECRET)
    assert matcher((SECRET,)).found(text)
    executor = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(tmp_path)}),
                        policy=ExecutionPolicy.allowing(["edit"]), approvals=ApprovalPolicy(),
                        approver=lambda request: True, known_secrets=(SECRET,))
    result = executor.execute_sync(ToolCall("c1", "write_file", {"path": "a.py", "content": f"K = '{encodings(SECRET)[name]}'\n"}))
    assert not result.ok and result.error.code == ErrorCode.SECRET_IN_ARGUMENTS
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param(f"{SECRET[3:]} spaced", f"{REDACTED} spaced", id="at-start"),
    pytest.param(f"raw={SECRET[3:]}", f"raw={REDACTED}", id="at-end"),
    pytest.param(f"raw-nopfx={SECRET[3:]} Zq8 spaced", f"raw-nopfx={REDACTED} Zq8 spaced", id="next-word-starts-like-the-key"),
    pytest.param(f"a {SECRET}\tb", f"a {REDACTED}\tb", id="next-to-whitespace"),
    pytest.param(f"a\n{SECRET}\nZ", f"a\n{REDACTED}\nZ", id="next-to-newlines"),
    pytest.param(f"é{SECRET}ü", f"é{REDACTED}ü", id="next-to-non-ascii"),
    pytest.param(f"日本{SECRET[:14]}語", f"日本{REDACTED}語", id="piece-next-to-cjk"),
    pytest.param(f"x{SECRET}{SECRET}y", f"x{REDACTED}y", id="repeated"),
    pytest.param(f"[{SECRET}] [{SECRET[::-1]}]", f"[{REDACTED}] [{REDACTED}]", id="two-cuts"),
    pytest.param(f"b64={b64(SECRET.encode())};", f"b64={REDACTED};", id="base64-padding-taken"),
    pytest.param(f"hex={SECRET.encode().hex()}.", f"hex={REDACTED}.", id="hex-then-separator"),
    pytest.param(f"k={' '.join(SECRET)} z", f"k={REDACTED} z", id="spaced-out"),
])
def test_a_cut_takes_the_key_and_nothing_around_it(text, expected):
    assert redact_text(text, (SECRET,)) == expected


@pytest.mark.parametrize("text", [
    "the quick-brown fox, it's here: a.b.c + d_e, \"quoted\" 'words' - stay as they are",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 and base64 aGVsbG8gd29ybGQ=",
    f"near misses: {SECRET[:10]} {SECRET[::-1][:10]} {SECRET.encode().hex()[:15]} {b64(SECRET.encode())[:15]}",
])
def test_ordinary_text_and_short_pieces_stay(text):
    """Under the bound nothing is cut. SECRET holds a ``+`` (a separator), so its bound is 11 kept
    characters: a 12-character run of it as written may hold only 11 (see ``SecretMatcher``)."""
    assert redact_text(text, (SECRET,)) == text
    assert not matcher((SECRET,)).found(text)


# -- entry points: the endpoint echoes every form ------------------------------------------------

ECHO = " ".join(f"{name}={value}" for name, value in encodings(KEY).items())


def streamed(protocol: str) -> list[Plan]:
    """Plan, echo every form in text and try to write two of them, then claim to be done."""
    content = json.dumps({"path": "settings.py", "content": f"A = '{encodings(KEY)['base64']}'\nB = '{KEY.encode().hex()}'\n"})
    return [
        Plan(chunks=list(reply(protocol, call=tasks_call("Add an isbn field to Book")))),
        Plan(chunks=list(reply(protocol, [f"Echo: {ECHO}"], call=("write_file", [content])))),
        *done_replies(protocol, 4),
    ]


def error_reply() -> list[Plan]:
    """A 400 whose message carries every form of the key (the red team's endpoint)."""
    return [json_error(400, {"error": {"message": f"bad key. {ECHO}", "type": "invalid_request_error"}})]


PLANS = {"streamed": streamed("openai"), "error": error_reply()}


def check_run(run_dir: Path, case: str) -> None:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "done"
    assert REDACTED in json.dumps(events)  # the echo arrived, and was cut
    if case == "streamed":
        refused = [e for e in events if e["type"] == "tool_result" and e["name"] == "write_file"]
        assert [e["error_code"] for e in refused] == [ErrorCode.SECRET_IN_ARGUMENTS], refused
        assert not (run_dir / "app" / "settings.py").exists()
    for path in run_dir.rglob("*"):
        assert_no_form(path.name, f"the name {path}")
        if path.is_file() and not path.is_symlink():
            assert_no_form(path.read_bytes(), str(path))


@pytest.mark.parametrize("case", list(PLANS))
def test_cli_keeps_every_form_of_the_key_out(server, tmp_path, case):
    server.plan(*PLANS[case])
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "BESSER_LLM_"))}
    out = tmp_path / "cli"
    out.mkdir()
    completed = subprocess.run(
        [sys.executable, "-m", "kernel_ext", "generate", "example:library", REQUEST, "--generator", "pydantic",
         "--provider", "openai", "--approve", "edits", "--out", str(tmp_path / "run")],
        cwd=out, env={**keep, "PYTHONPATH": str(ROOT), **endpoint_env(server, "openai")}, capture_output=True, timeout=120, check=False,
    )
    assert completed.returncode in (0, 1), completed.stderr.decode(errors="replace")
    assert_no_form(completed.stdout, "CLI stdout")
    assert_no_form(completed.stderr, "CLI stderr")
    check_run(tmp_path / "run", case)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli", "run"] and list(out.iterdir()) == []


@pytest.mark.parametrize("case", list(PLANS))
async def test_python_api_keeps_every_form_of_the_key_out(server, tmp_path, monkeypatch, case):
    from kernel_ext.pipeline.generation import generate

    for name, value in endpoint_env(server, "openai").items():
        monkeypatch.setenv(name, value)
    server.plan(*PLANS[case])
    run = generate("example:library", REQUEST, run_dir=tmp_path / "run", provider="openai", target="pydantic",
                   approver=lambda request: True)
    await asyncio.wait_for(run.wait(), 120)
    check_run(tmp_path / "run", case)
    assert_no_form(json.dumps([e.model_dump(mode="json") for e in run.events.events]), "the events in memory")
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


@pytest.mark.parametrize("case", list(PLANS))
async def test_rest_keeps_every_form_of_the_key_out(server, jp_fetch, jp_serverapp, runs_dir, monkeypatch, case):
    for name, value in endpoint_env(server, "openai").items():
        monkeypatch.setenv(name, value)
    server.plan(*PLANS[case])
    body = {"kind": "generate", "request": REQUEST, "model_path": "example:library", "target": "pydantic",
            "provider": "openai", "approve": "edits"}
    started = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    run_id = json.loads(started.body)["run"]["id"]
    async with async_client(jp_serverapp) as client:
        deadline = time.monotonic() + 120
        while (await client.get(f"runs/{run_id}")).json()["run"]["live"] and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        stream = (await client.get(f"runs/{run_id}/events")).text
    assert_no_form(stream, "the SSE stream")
    check_run(runs_dir / run_id, case)
    assert [p.name for p in runs_dir.iterdir()] == [run_id]
