"""What a person reads says it right: plurals, articles, line ranges, an ellipsis where text is
cut, and a field that only describes a credential (``token_type: bearer``) is not redacted,
while every credential still is, on every path that shows it (events, the request report, the
run view)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_ext.errors import ToolFailure
from kernel_ext.hosting.events import make_event, to_json
from kernel_ext.safetext import article, line_range, plural, shorten
from kernel_ext.secrets import describes_secret, is_secret_field, is_secret_name, redact
from widgets.report import RequestReport
from widgets.runview import RunView

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("count", "noun", "many", "said"), [
    (0, "file", None, "0 files"), (1, "file", None, "1 file"), (2, "file", None, "2 files"),
    (1, "entry", "entries", "1 entry"), (3, "entry", "entries", "3 entries"), (1200, "line", None, "1,200 lines"),
])
def test_plural(count, noun, many, said):
    assert plural(count, noun, many) == said


@pytest.mark.parametrize(("word", "said"), [
    ("int", "an int"), ("str", "a str"), ("object", "an object"), ("enum", "an enum"), ("Integer", "an Integer"),
    ("union", "a union"), ("user", "a user"), ("UUID", "a UUID"), ("hour", "an hour"), ("float", "a float"),
])
def test_article(word, said):
    assert article(word) == said


def test_line_range_and_ellipsis():
    assert line_range(9, 9) == "line 9" and line_range(46, 48) == "lines 46-48"
    assert shorten("abcdef", 4) == "abc…" and shorten("abc", 4) == "abc" and len(shorten("x" * 50, 10)) == 10


def test_a_model_that_is_not_one_names_its_type_with_the_right_article():
    from kernel_ext.model.loading import check_model

    with pytest.raises(ToolFailure) as raised:
        check_model(5, origin="library")
    assert "library is an int, not a B-UML DomainModel" in str(raised.value)


def test_a_refused_statement_in_a_model_file_reads_right(tmp_path):
    from kernel_ext.model.loading import load

    path = tmp_path / "model.py"
    path.write_text("x = 1\nif x:\n    y = 2\n")
    with pytest.raises(ToolFailure) as raised:
        load(path)
    assert "an if statement" in str(raised.value) and "a if " not in str(raised.value)


async def test_a_one_line_edit_says_line_not_lines(tmp_path):
    from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall, always_approve
    from kernel_ext.tools.base import ToolContext
    from kernel_ext.tools.registry import default_catalog
    from kernel_ext.workspace import Workspace

    (tmp_path / "a.py").write_text("x = 1\ny = 2\nz = 3\n")
    executor = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(tmp_path)}),
                        policy=ExecutionPolicy.allowing(["edit"]), approver=always_approve)
    assert (await executor.execute(ToolCall("r", "read_file", {"path": "a.py"}))).ok
    result = await executor.execute(ToolCall("m", "modify_file", {"path": "a.py", "old_text": "y = 2\n", "new_text": "y = 20\n"}))
    assert result.ok and "(new line 2); the file now has 3 lines" in result.observation
    assert "2-2" not in result.observation


def test_recorded_runs_read_right():
    jwt = [json.loads(line) for line in (DATA / "library_jwt_run.events.jsonl").read_text().splitlines()]
    validate = next(e for e in jwt if e["type"] == "phase" and e["phase"] == "validate" and e["status"] == "done")
    assert validate["message"].startswith("0 blockers left after 1 repair round (")
    tour = (DATA / "tools_tour.events.jsonl").read_text()
    assert "[stderr: 1 line, 60 bytes]" in tour and "writes 1 file under pydantic/" in tour
    assert "1 lines" not in tour and "1 files" not in tour
    view = RunView().replay(jwt)
    shown = view.to_text() + view.to_html()
    for wrong in ("1 files", "1 turns", "1 approvals", "lines 9-9", "1 lines"):
        assert wrong not in shown, wrong


# -- descriptor fields are not secrets; credentials stay redacted ---------------------------------

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZGEifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
LOGIN_REPLY = {"access_token": TOKEN, "token_type": "bearer", "expires_in": 3600, "refresh_token": "r-8f3a9c21d4e5b6a7"}


@pytest.mark.parametrize(("name", "value", "kept"), [
    ("token_type", "bearer", True), ("tokenType", "Bearer", True), ("TOKEN_TYPE", "bearer", True),
    ("key_type", "ssh-ed25519", True), ("token_expires_in", "3600", True), ("secret_length", "32", True),
    ("issued_token_type", "urn:ietf:params:oauth:token-type:access_token", True),
    # a credential under a descriptor name is still one
    ("token_type", TOKEN, False), ("key_type", "sk-abcdefghijklmnopqrstuvwx", False), ("token_type", "a1b2c3d4e5f6a7b8c9d0", False),
    # secret names are untouched by the rule
    ("access_token", "bearer", False), ("password", "hunter2", False), ("client_secret", "x", False), ("api_key", "short", False),
])
def test_which_fields_are_withheld_by_name(name, value, kept):
    assert is_secret_field(name, value) is not kept
    shown = redact({name: value})
    assert (shown[name] == value) is kept


def test_descriptors_are_still_secret_names_for_the_sandbox_environment():
    """The tool environment's scrub stays strict: a variable named TOKEN_TYPE is still removed."""
    from kernel_ext.sandbox.env import split_secrets

    assert is_secret_name("TOKEN_TYPE") and describes_secret("TOKEN_TYPE")
    kept, removed = split_secrets({"TOKEN_TYPE": "bearer", "PATH": "/usr/bin"})
    assert removed == ["TOKEN_TYPE"] and kept == {"PATH": "/usr/bin"}


def _event_text() -> str:
    event = make_event("tool_result", "r-1", call_id="c1", name="test_api", ok=True, data={"body": LOGIN_REPLY})
    return to_json(event)


def _report_text() -> str:
    widget = RequestReport({"requests": [{"method": "POST", "path": "/auth/login", "status": 200,
                                          "response": {"body": LOGIN_REPLY}}]})
    return widget.to_text() + widget.to_html()


def _view_text() -> str:
    view = RunView().replay([make_event("tool_result", "r-1", call_id="c1", name="test_api", ok=True,
                                        data={"report": {"requests": [{"method": "POST", "path": "/auth/login", "status": 200,
                                                                       "passed": True, "response": {"body": LOGIN_REPLY}}]}})])
    return view.to_html() + view.to_text()


@pytest.mark.parametrize("shown", [_event_text, _report_text, _view_text], ids=["event", "request-report", "run-view"])
def test_a_login_reply_keeps_token_type_and_hides_the_tokens(shown):
    text = shown()
    assert TOKEN not in text and "r-8f3a9c21d4e5b6a7" not in text and "eyJzdWIiOiJhZGEifQ" not in text
    if shown is not _view_text:  # the view shows the report's counts, not its bodies
        assert "bearer" in text and "[redacted]" in text


async def test_reading_one_line_says_line(tmp_path):
    from kernel_ext.boundary import Executor, ToolCall
    from kernel_ext.tools.base import ToolContext
    from kernel_ext.tools.registry import default_catalog
    from kernel_ext.workspace import Workspace

    (tmp_path / "a.py").write_text("x = 1\ny = 2\nz = 3\n")
    executor = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(tmp_path)}))
    result = await executor.execute(ToolCall("r", "read_file", {"path": "a.py", "offset": 1, "limit": 1}))
    assert result.ok and result.observation.startswith("a.py line 2 of 3 (read_id") and "[line 3 not shown" in result.observation
