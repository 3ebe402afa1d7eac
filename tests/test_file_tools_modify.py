"""modify_file, write_file and delete_file: anchors, replays, whole-file rules, evidence."""

from __future__ import annotations

from pathlib import Path

import pytest
from file_tool_helpers import Harness

from kernel_ext.errors import ErrorCode
from kernel_ext.tools.evidence import evidence_log

ROUTES = '''from fastapi import FastAPI

app = FastAPI()


@app.get("/books")
def list_books():
    return []


@app.get("/authors")
def list_authors():
    return []
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "main_api.py").write_text(ROUTES)
    return root


def test_modify_replaces_a_unique_anchor(project):
    h = Harness(project)
    result = h.call("modify_file", path="main_api.py", old_text='@app.get("/books")\ndef list_books():', new_text='@app.get("/books")\ndef all_books():')
    assert result.ok, result.observation
    assert "def all_books():" in (project / "main_api.py").read_text()
    assert result.data["changed"] == [[6, 7]]
    record = evidence_log(h.context.state).records[-1]
    assert record.tool == "modify_file" and record.changed == ((6, 7),) and record.fingerprint


def test_modify_refusals(project):
    h = Harness(project)
    h.refused(ErrorCode.AMBIGUOUS_MATCH, "modify_file", path="main_api.py", old_text="    return []", new_text="    return [1]")
    h.refused(ErrorCode.NO_CHANGE, "modify_file", path="main_api.py", old_text="app = FastAPI()", new_text="app = FastAPI()")
    h.refused(ErrorCode.NO_MATCH, "modify_file", path="main_api.py", old_text="app = Flask()", new_text="app = Starlette()")
    h.refused(ErrorCode.INVALID_ARGUMENT, "modify_file", path="main_api.py", old_text="", new_text="x = 1")
    h.refused(ErrorCode.SYNTAX_ERROR, "modify_file", path="main_api.py", old_text="app = FastAPI()", new_text="app = FastAPI(")
    h.refused(ErrorCode.ELISION, "modify_file", path="main_api.py", old_text="def list_books():\n    return []",
              new_text="def list_books():\n    # ... existing code unchanged ...")
    missing = h.refused(ErrorCode.NOT_FOUND, "modify_file", path="main_apii.py", old_text="a", new_text="b")
    assert missing.data["did_you_mean"] == ["main_api.py"]


def test_replace_all_takes_every_exact_occurrence(project):
    h = Harness(project)
    result = h.call("modify_file", path="main_api.py", old_text="    return []", new_text="    return list()", replace_all=True)
    assert result.ok and (project / "main_api.py").read_text().count("return list()") == 2
    assert result.data["changed"] == [[8, 8], [13, 13]]


def test_whitespace_tiers_are_used_only_when_unambiguous(project):
    h = Harness(project)
    # one line lost its indentation and the other did not: no single shift explains it, no match
    h.refused(ErrorCode.NO_MATCH, "modify_file", path="main_api.py", old_text='def list_authors():\nreturn []',
              new_text='def list_authors():\nreturn ["x"]')
    # trailing whitespace differs: the line-ends tier matches the one place
    result = h.call("modify_file", path="main_api.py", old_text='@app.get("/authors")  \ndef list_authors():   ',
                    new_text='@app.get("/writers")\ndef list_authors():')
    assert result.ok and '@app.get("/writers")' in (project / "main_api.py").read_text()


def test_indentation_tier_reindents_the_new_text(tmp_path):
    (tmp_path / "m.py").write_text("class A:\n    def f(self):\n        return 1\n")
    h = Harness(tmp_path)
    result = h.call("modify_file", path="m.py", old_text="def f(self):\n    return 1", new_text="def f(self):\n    return 2")
    assert result.ok, result.observation
    assert (tmp_path / "m.py").read_text() == "class A:\n    def f(self):\n        return 2\n"


def test_duplicate_looking_insertions_are_refused(project):
    h = Harness(project)
    anchor = "app = FastAPI()\n"
    h.refused(ErrorCode.DUPLICATE_INSERTION, "modify_file", path="main_api.py", old_text=anchor,
              new_text=anchor + '\n@app.get("/books")\ndef list_books():\n')
    h.refused(ErrorCode.DUPLICATE_INSERTION, "modify_file", path="main_api.py", old_text="from fastapi import FastAPI\n",
              new_text="from fastapi import FastAPI\nfrom fastapi import FastAPI\n")
    ok = h.call("modify_file", path="main_api.py", old_text=anchor, new_text=anchor + "app.title = 'Library'\n")
    assert ok.ok


def test_already_applied_needs_the_receipt_and_an_unchanged_file(project):
    h = Harness(project)
    args = {"path": "main_api.py", "old_text": '"/authors"', "new_text": '"/writers"'}
    assert h.call("modify_file", **args).ok
    after_edit = (project / "main_api.py").read_bytes()
    again = h.call("modify_file", **args)
    assert again.ok and again.data["status"] == "already_applied" and again.data["written"] is False
    assert (project / "main_api.py").read_bytes() == after_edit
    # the file moved on: the receipt no longer proves anything
    (project / "main_api.py").write_text(after_edit.decode() + "\n# touched\n")
    h.refused(ErrorCode.POSSIBLE_REPLAY, "modify_file", **args)


def test_after_a_restart_a_replay_is_possible_replay_not_success(project):
    args = {"path": "main_api.py", "old_text": '"/authors"', "new_text": '"/writers"'}
    assert Harness(project).call("modify_file", **args).ok
    restarted = Harness(project)  # a new run: no receipt
    restarted.refused(ErrorCode.POSSIBLE_REPLAY, "modify_file", **args)
    # an anchor that is part of its own replacement, already applied
    grow = {"path": "main_api.py", "old_text": "app = FastAPI()", "new_text": "app = FastAPI()  # the API"}
    assert restarted.call("modify_file", **grow).ok
    Harness(project).refused(ErrorCode.POSSIBLE_REPLAY, "modify_file", **grow)


def test_write_file_creates_and_refuses_rewrites_from_memory(project):
    h = Harness(project)
    created = h.call("write_file", path="routers/new.py", content="X = 1\n")
    assert created.ok and created.data["status"] == "created"
    assert (project / "routers" / "new.py").read_text() == "X = 1\n"
    h.refused(ErrorCode.NOT_READ, "write_file", path="main_api.py", content="app = None\n")
    h.read("main_api.py", limit=5)  # partial read is not enough
    h.refused(ErrorCode.NOT_READ, "write_file", path="main_api.py", content="app = None\n")
    h.read("main_api.py", offset=5)  # the rest: now all lines were shown
    assert h.call("write_file", path="main_api.py", content=ROUTES + "\napp.title = 'x'\n").ok
    assert h.call("write_file", path="main_api.py", content=ROUTES).ok  # its own write is known whole
    (project / "main_api.py").write_text(ROUTES + "# someone else\n")
    h.refused(ErrorCode.STALE_INPUT, "write_file", path="main_api.py", content=ROUTES)
    h.read("main_api.py")
    h.refused(ErrorCode.NO_CHANGE, "write_file", path="main_api.py", content=ROUTES + "# someone else\n")
    h.refused(ErrorCode.SYNTAX_ERROR, "write_file", path="main_api.py", content="def broken(:\n")
    h.refused(ErrorCode.SYNTAX_ERROR, "write_file", path="fresh.py", content="def broken(:\n")
    h.refused(ErrorCode.ELISION, "write_file", path="main_api.py", content="from fastapi import FastAPI\n# ... rest of the file\n")
    h.refused(ErrorCode.NUMBERED_TEXT, "write_file", path="other.py", content="   1| x = 1\ny = 2\n")


def test_delete_file(project):
    h = Harness(project)
    (project / "old.py").write_text("X = 1\n")
    result = h.call("delete_file", path="old.py")
    assert result.ok and not (project / "old.py").exists()
    assert evidence_log(h.context.state).records[-1].deleted is True
    h.refused(ErrorCode.NOT_FOUND, "delete_file", path="old.py")
    (project / "folder").mkdir()
    h.refused(ErrorCode.NOT_REGULAR_FILE, "delete_file", path="folder")


def test_edits_are_refused_by_policy_without_approval(project):
    from file_tool_helpers import FILE_TOOLS

    from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall

    h = Harness(project)
    read_only = Executor(FILE_TOOLS, h.context, policy=ExecutionPolicy())
    result = read_only.execute_sync(ToolCall("p1", "write_file", {"path": "x.py", "content": "x = 1\n"}))
    assert result.error.code == ErrorCode.POLICY_DENIED and not (project / "x.py").exists()
    denying = Harness(project, approver=lambda request: False)
    result = denying.call("write_file", path="x.py", content="x = 1\n")
    assert result.error.code == ErrorCode.APPROVAL_DENIED and not (project / "x.py").exists()
