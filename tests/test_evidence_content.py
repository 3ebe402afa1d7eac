"""A checklist citation must quote code this run wrote or changed, judged by content (issue 19,
item 9; the red team's evasions): compared with the file as the run began, through a line diff
of code (whitespace and comments do not count, a moved line is not new, a re-created file is
compared with the one deleted). Each case runs through the Executor (Python API) and through
``python -m kernel_ext calls`` (the tool CLI); a refusal leaves the tree as the edits left it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall, always_approve
from kernel_ext.generation.manifest import tree_hashes
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.tools.task_list import SERVICE, TaskList
from kernel_ext.tools.written_lines import record_start, written_lines
from kernel_ext.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]
ORIG = "def helper():\n    return 1\n\n\ndef authenticate(user):\n    return check_password(user)\n"
JS = "function f() {\n  return 1;\n}\n\nfunction g(u) {\n  return check(u);\n}\n"
CITED = "return check_password(user)"


def _write(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def _modify(old: str, new: str, path: str = "auth.py") -> dict:
    return {"name": "modify_file", "arguments": {"path": path, "old_text": old, "new_text": new}}


READ = {"name": "read_file", "arguments": {"path": "auth.py"}}
DELETE = {"name": "delete_file", "arguments": {"path": "auth.py"}}

# name: (edits, cited path, quote, expected error code or "" for accepted, the files after the edits)
CASES = {
    "untouched line of an edited file": ([_modify("return 1", "return 2")], "auth.py", CITED, "evidence_untouched",
                                         {"auth.py": ORIG.replace("return 1", "return 2")}),
    "whole-file rewrite, the cited line unchanged": ([READ, _write("auth.py", ORIG.replace("return 1", "return 2"))],
                                                     "auth.py", CITED, "evidence_untouched",
                                                     {"auth.py": ORIG.replace("return 1", "return 2")}),
    "trailing space on the cited line": ([READ, _write("auth.py", ORIG.replace(CITED, CITED + " "))], "auth.py", CITED,
                                         "evidence_untouched", {"auth.py": ORIG.replace(CITED, CITED + " ")}),
    "re-indented cited line": ([_modify("    " + CITED, "        " + CITED)], "auth.py", CITED, "evidence_untouched",
                               {"auth.py": ORIG.replace("    " + CITED, "        " + CITED)}),
    "comment added to the cited line": ([_modify(CITED, CITED + "  # checked")], "auth.py", CITED, "evidence_untouched",
                                        {"auth.py": ORIG.replace(CITED, CITED + "  # checked")}),
    "quote hidden in a comment of a written line": ([_modify("return 1", "return 1  # " + CITED)], "auth.py", CITED,
                                                    "evidence_untouched", {"auth.py": ORIG.replace("return 1", "return 1  # " + CITED)}),
    "blank line added after the cited line": ([_modify(f"    {CITED}\n", f"    {CITED}\n\n")], "auth.py", CITED,
                                              "evidence_untouched", {"auth.py": ORIG + "\n"}),
    "edit spanning the cited line, rewriting it unchanged": (
        [_modify(f"def authenticate(user):\n    {CITED}", f"def authenticate(user, strict=False):\n    {CITED}")],
        "auth.py", CITED, "evidence_untouched", {"auth.py": ORIG.replace("(user):", "(user, strict=False):")}),
    "delete, then re-create the same text": ([DELETE, _write("auth.py", ORIG)], "auth.py", CITED, "evidence_untouched",
                                             {"auth.py": ORIG}),
    "untouched function moved above another": (
        [READ, _write("auth.py", "def authenticate(user):\n    return check_password(user)\n\n\ndef helper():\n    return 1\n")],
        "auth.py", CITED, "evidence_untouched",
        {"auth.py": "def authenticate(user):\n    return check_password(user)\n\n\ndef helper():\n    return 1\n"}),
    "quote hidden in a // comment (JavaScript)": ([_modify("return 1;", "return 1; // return check(u);", "app.js")],
                                                  "app.js", "return check(u);", "evidence_untouched",
                                                  {"app.js": JS.replace("return 1;", "return 1; // return check(u);")}),
    "a comment-only quote": ([_modify("return 1", "return 1\n    # the password is checked")], "auth.py",
                             "# the password is checked", "evidence_not_code",
                             {"auth.py": ORIG.replace("return 1", "return 1\n    # the password is checked")}),
    "a trivial quote (pass)": ([_modify("return 1", "pass")], "auth.py", "pass", "evidence_not_code",
                               {"auth.py": ORIG.replace("return 1", "pass")}),
    # red team 3: a `/*` in a string of a changed line must not hide the untouched line after it
    "a /* in a written string hides the next, untouched line (JavaScript)": (
        [_modify("  return check(u);", '  const s = "audit(user, action) /*";\n  return check(u);', "app.js")], "app.js",
        'audit(user, action) /*";\n  return check(u);', "evidence_untouched",
        {"app.js": JS.replace("  return check(u);", '  const s = "audit(user, action) /*";\n  return check(u);')}),
    # red team 3: code moved or copied between files is not new (tree-wide baseline)
    "a copy of an untouched file": ([_write("moved.py", ORIG)], "moved.py", CITED, "evidence_untouched",
                                    {"moved.py": ORIG}),
    "a function moved to another file": (
        [_modify(f"\n\ndef authenticate(user):\n    {CITED}\n", "\n"), _write("login.py", f"def authenticate(user):\n    {CITED}\n")],
        "login.py", CITED, "evidence_untouched",
        {"auth.py": "def helper():\n    return 1\n\n", "login.py": f"def authenticate(user):\n    {CITED}\n"}),
    "a copy of a file this run wrote earlier is still new code": (
        [_write("a.py", "def fresh():\n    return compute_value()\n"), _write("b.py", "def fresh():\n    return compute_value()\n")],
        "b.py", "return compute_value()", "",
        {"a.py": "def fresh():\n    return compute_value()\n", "b.py": "def fresh():\n    return compute_value()\n"}),
    "the quote's string line is new, so it alone is accepted": (
        [_modify("  return check(u);", '  const s = "audit(user, action) /*";\n  return check(u);', "app.js")], "app.js",
        'const s = "audit(user, action) /*";', "",
        {"app.js": JS.replace("  return check(u);", '  const s = "audit(user, action) /*";\n  return check(u);')}),
    # what must stay accepted (over-refusal is a failure too)
    "changed cited line": ([_modify(CITED, "return check_password(user, strict=True)")], "auth.py",
                           "return check_password(user, strict=True)", "",
                           {"auth.py": ORIG.replace(CITED, "return check_password(user, strict=True)")}),
    "a small real change": ([_modify("return 1", "return 2")], "auth.py", "return 2", "",
                            {"auth.py": ORIG.replace("return 1", "return 2")}),
    "new file of real code": ([_write("check.py", "def check(user):\n    return verify_hash(user)\n")], "check.py",
                              "return verify_hash(user)", "",
                              {"auth.py": ORIG, "check.py": "def check(user):\n    return verify_hash(user)\n"}),
    "re-created with a change, quoting the change": (
        [DELETE, _write("auth.py", ORIG.replace("return 1", "return helper_value()"))], "auth.py", "return helper_value()",
        "", {"auth.py": ORIG.replace("return 1", "return helper_value()")}),
    "a quote over written code with a comment in it": (
        [_modify("return 1", "value = compute()  # the sum\n    return value")], "auth.py",
        "value = compute()  # the sum\n    return value", "",
        {"auth.py": ORIG.replace("return 1", "value = compute()  # the sum\n    return value")}),
}


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def _seed(root: Path) -> None:
    (root / "auth.py").write_text(ORIG)
    (root / "app.js").write_text(JS)


def _via_executor(root: Path, plan: list[dict]) -> list[dict]:
    ctx = ToolContext(services={"workspace": Workspace(root), SERVICE: TaskList()})
    record_start(ctx.state, root)  # as Phase 2 does
    executor = Executor(default_catalog(), ctx, policy=ExecutionPolicy.allowing([Category.EDIT, Category.PLAN]),
                        approver=always_approve)
    return [executor.execute_sync(ToolCall(f"c{i}", c["name"], c["arguments"])).model_dump(mode="json")
            for i, c in enumerate(plan)]


def _via_cli(root: Path, plan: list[dict]) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "kernel_ext", "calls", "--workspace", str(root), "--allow", "edit",
                           "--allow", "plan", "--approve", "yes", "-"], cwd=REPO, input=json.dumps(plan),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("entry", [_via_executor, _via_cli], ids=["api", "cli"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_citation_stands_on_content_this_run_changed(tmp_path, case, entry):
    edits, path, quote, expected, files = CASES[case]
    _seed(tmp_path)
    add = {"name": "task_list", "arguments": {"action": "add", "text": "login checks the password"}}
    cite = {"name": "task_list", "arguments": {"action": "done", "id": "T1", "evidence": [{"id": "T1", "path": path, "quote": quote}]}}
    results = entry(tmp_path, [add, *edits, cite])
    assert all(r["ok"] for r in results[:-1]), [r["observation"] for r in results if not r["ok"]]
    done = results[-1]
    if expected:
        assert not done["ok"] and done["error"]["code"] == expected, done["observation"]
    else:
        assert done["ok"], done["observation"]
    assert _tree(tmp_path) == {"app.js": JS, "auth.py": ORIG, **files}  # the refusal (or acceptance) wrote nothing


def test_a_file_changed_before_the_first_write_has_no_known_baseline(tmp_path):
    """With the host's digests of the tree when customisation began, a line a shell command removed
    and the file tools put back is not this run's work: the file's baseline is not known."""
    _seed(tmp_path)
    ctx = ToolContext(services={"workspace": Workspace(tmp_path), SERVICE: TaskList()})
    written_lines(ctx.state).record_start(tree_hashes(tmp_path))
    executor = Executor(default_catalog(), ctx, policy=ExecutionPolicy.allowing([Category.EDIT, Category.PLAN]),
                        approver=always_approve)
    call = lambda name, **a: executor.execute_sync(ToolCall(f"c-{name}", name, a))  # noqa: E731
    assert call("task_list", action="add", text="login").ok
    (tmp_path / "auth.py").write_text(ORIG.replace(f"    {CITED}\n", "    pass\n"))  # as a shell command would
    assert call("modify_file", path="auth.py", old_text="    pass", new_text=f"    {CITED}").ok
    (tmp_path / "new.py").write_text("X = 1\n")  # made outside the file tools during the run
    assert call("modify_file", path="new.py", old_text="X = 1", new_text="X = compute_value()").ok
    assert call("write_file", path="fresh.py", content="def fresh():\n    return compute_value()\n").ok
    before = _tree(tmp_path)
    cite = lambda path, quote: call("task_list", action="done", id="T1",  # noqa: E731
                                    evidence=[{"id": "T1", "path": path, "quote": quote}])
    for path, quote in (("auth.py", CITED), ("new.py", "X = compute_value()")):
        refused = cite(path, quote)
        assert refused.error.code == "evidence_untouched" and "before this run" in refused.observation
    assert cite("fresh.py", "return compute_value()").ok  # created by the file tools: all new
    assert _tree(tmp_path) == before


def test_a_generators_output_is_a_baseline_not_this_runs_work(tmp_path):
    """A ``generate_*`` call during the run (BESSER's real pydantic generator) writes a file the start
    digests do not know: its output is the baseline (the ledger vouches for it), so a later edit's line
    can be cited and the generated lines cannot."""
    from kernel_ext.model import build_library_model

    (tmp_path / "README.md").write_text("mine\n")
    ctx = ToolContext(services={"workspace": Workspace(tmp_path), SERVICE: TaskList(), "domain_model": build_library_model()})
    written_lines(ctx.state).record_start(tree_hashes(tmp_path))
    executor = Executor(default_catalog(), ctx, policy=ExecutionPolicy.allowing([Category.EDIT, Category.PLAN, "generate"]),
                        approver=always_approve)
    call = lambda name, **a: executor.execute_sync(ToolCall(f"c-{name}", name, a))  # noqa: E731
    generated = call("generate_pydantic")
    assert generated.ok, generated.observation
    path = "pydantic/pydantic_classes.py"
    assert 'FICTION = "FICTION"' in (tmp_path / path).read_text()
    assert call("modify_file", path=path, old_text='FICTION = "FICTION"', new_text='FICTION = "FICTION_BOOKS"').ok
    assert call("task_list", action="add", text="rename the genre").ok
    cite = lambda quote: call("task_list", action="done", id="T1",  # noqa: E731
                              evidence=[{"id": "T1", "path": path, "quote": quote}])
    before = _tree(tmp_path)
    assert cite('SCIENCE = "SCIENCE"').error.code == "evidence_untouched"  # the generator wrote it, not this edit
    assert cite('FICTION = "FICTION_BOOKS"').ok
    assert _tree(tmp_path) == before
    # a copy of the generator's file is the generator's code, not this run's (red team 3)
    assert call("write_file", path="copy.py", content=(tmp_path / path).read_text()).ok
    before = _tree(tmp_path)
    copied = call("task_list", action="done", id="T1", evidence=[{"id": "T1", "path": "copy.py", "quote": 'SCIENCE = "SCIENCE"'}])
    assert copied.error.code == "evidence_untouched", copied.observation
    assert _tree(tmp_path) == before


@pytest.mark.parametrize(("path", "text", "code"), [
    ("a.py", 'x = "a # b"  # note\n# only a comment\n', ['x = "a # b"', "", ""]),
    ("a.py", 'doc = """# kept\nstill # kept"""\ny = 1 # gone\n', ['doc = """# kept', 'still # kept"""', "y = 1", ""]),
    ("a.ts", "a = 1; /* x\n y */ b = 2 // c\nconst s = '//no';\n", ["a = 1;", "b = 2", "const s = '//no';", ""]),
    ("q.sql", "select 1 -- c\n/* x */ from t\n", ["select 1", "from t", ""]),
    ("Dockerfile", "# base\nFROM python:3.12  # pinned\n", ["", "FROM python:3.12", ""]),
    ("data.json", '{"a": "#1"}\n', ['{"a": "#1"}', ""]),
])
def test_code_lines_drop_comments_by_the_files_kind(path, text, code):
    from kernel_ext.tools.code_text import code_lines

    assert code_lines(path, text) == code
