"""list_files, read_file, search_in_files and check_syntax through the Executor."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from file_tool_helpers import FILE_TOOLS, Harness

from kernel_ext.errors import ErrorCode
from kernel_ext.tools import files_read
from kernel_ext.tools.search import search
from kernel_ext.workspace import Workspace


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "app").mkdir(parents=True)
    (root / "app" / "main.py").write_text("".join(f"line_{n} = {n}\n" for n in range(1, 51)))
    (root / "app" / "flags.py").write_text("ARGS = ['-v', '--verbose']\nopt = '-x'\n")
    (root / "README.md").write_text("# demo\n-v enables verbose output\n")
    (root / "blob.bin").write_bytes(b"-v\x00\x01binary")
    (root / "latin.txt").write_bytes("caf\xe9 -v\n".encode("latin-1"))
    return root


def test_tools_are_registered_with_their_contract_names():
    from kernel_ext.tools.registry import default_catalog

    catalog = default_catalog()
    expected = {
        "list_files": {"path"},
        "read_file": {"path", "offset", "limit"},
        "write_file": {"path", "content"},
        "modify_file": {"path", "old_text", "new_text", "replace_all"},
        "replace_file_lines": {"path", "read_id", "start_line", "end_line", "new_text"},
        "search_in_files": {"pattern", "file_glob", "path"},
        "delete_file": {"path"},
        "check_syntax": {"path"},
    }
    for name, fields in expected.items():
        spec = catalog.get(name)
        assert spec is not None and spec.requires == frozenset({"workspace"})
        assert set(spec.json_schema()["properties"]) == fields
    assert {catalog.get(n).category for n in ("list_files", "read_file", "search_in_files", "check_syntax")} == {"read"}
    assert {catalog.get(n).category for n in ("write_file", "modify_file", "replace_file_lines", "delete_file")} == {"edit"}
    assert FILE_TOOLS.get("replace_file_lines").json_schema()["additionalProperties"] is False


def test_read_file_numbers_lines_and_returns_a_read_id(project):
    h = Harness(project)
    result = h.call("read_file", path="app/main.py", offset=9, limit=3)
    assert result.ok
    lines = result.observation.splitlines()
    assert lines[1:4] == ["  10| line_10 = 10", "  11| line_11 = 11", "  12| line_12 = 12"]
    assert result.data["read_id"] in lines[0] and "lines 10-12 of 50" in lines[0]
    assert "offset=12" in lines[-1]
    assert (result.data["start_line"], result.data["end_line"], result.data["total_lines"]) == (10, 12, 50)


def test_read_file_windows_large_files_and_cuts_long_lines(project, monkeypatch):
    monkeypatch.setattr(files_read, "READ_MAX_CHARS", 200)
    (project / "long.txt").write_text("short\n" + "x" * 5000 + "\nend\n")
    h = Harness(project)
    result = h.call("read_file", path="app/main.py")
    assert result.data["end_line"] < 50 and result.data["truncated"]
    assert f"offset={result.data['end_line']}" in result.observation
    monkeypatch.setattr(files_read, "READ_MAX_CHARS", 14_000)
    cut = h.call("read_file", path="long.txt")
    assert cut.data["cut_lines"] == [2] and "line cut" in cut.observation


def test_read_file_refusals(project):
    h = Harness(project)
    missing = h.refused(ErrorCode.NOT_FOUND, "read_file", path="app/mian.py")
    assert missing.data["did_you_mean"][0] == "app/main.py"
    assert "app/main.py" in missing.observation and "Nothing was substituted" in missing.observation
    h.refused(ErrorCode.NOT_TEXT, "read_file", path="blob.bin")
    h.refused(ErrorCode.NOT_TEXT, "read_file", path="latin.txt")
    h.refused(ErrorCode.INVALID_ARGUMENT, "read_file", path="app/main.py", offset=50)
    h.refused(ErrorCode.INVALID_ARGUMENT, "read_file", path="app/main.py", limit=0)
    h.refused(ErrorCode.MISSING_ARGUMENT, "read_file")
    h.refused(ErrorCode.INVALID_ARGUMENT, "read_file", path="app/main.py", colour="red")


def test_list_files_bounded_with_counts(project, monkeypatch):
    monkeypatch.setattr(files_read, "LIST_LIMIT", 3)
    os.symlink("/etc/passwd", project / "escape")
    h = Harness(project)
    result = h.call("list_files")
    assert result.ok and len(result.data["entries"]) == 3
    assert result.data["cut"] == result.data["total"] - 3 > 0
    assert result.data["skipped"] == {"links resolving outside the workspace": 1}
    assert "more not listed" in result.observation and "escape" not in result.observation
    sub = h.call("list_files", path="app")
    assert [e["path"] for e in sub.data["entries"]] == ["app/flags.py", "app/main.py"]


@pytest.mark.parametrize("pattern", ["-v", "--verbose", "-x'", r"line_4\d", "^# ", "café", "(?i)README"])
def test_ripgrep_and_pure_python_search_agree(project, pattern):
    if shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    ws = Workspace(project)
    by_python = search(ws, pattern, engine="python")
    by_rg = search(ws, pattern, engine="rg")
    assert by_rg.engine == "rg"
    assert by_rg.hits == by_python.hits
    assert (by_rg.total, by_rg.files_matched, by_rg.skipped) == (by_python.total, by_python.files_matched, by_python.skipped)


def test_search_finds_a_pattern_starting_with_a_dash(project):
    h = Harness(project)
    result = h.call("search_in_files", pattern="-v")
    assert result.ok
    found = {(m["path"], m["line"]) for m in result.data["matches"]}
    assert found == {("app/flags.py", 1), ("README.md", 2)}
    assert result.data["skipped"] == {
        "binary files with a possible match (not shown)": 1,
        "files that are not UTF-8 with a possible match (not shown)": 1,
    }


def test_search_glob_path_limits_and_bad_patterns(project, monkeypatch):
    h = Harness(project)
    only_py = h.call("search_in_files", pattern="=", file_glob="*.py")
    assert {m["path"] for m in only_py.data["matches"]} == {"app/main.py", "app/flags.py"}
    in_app = h.call("search_in_files", pattern="line_1\\b", path="app")
    assert [m["line"] for m in in_app.data["matches"]] == [1]
    monkeypatch.setattr(files_read, "SEARCH_LIMIT", 5)
    many = h.call("search_in_files", pattern="line_")
    assert len(many.data["matches"]) == 5 and many.data["cut"] == 45 and "45 more matches" in many.observation
    h.refused(ErrorCode.INVALID_ARGUMENT, "search_in_files", pattern="(")
    h.refused(ErrorCode.INVALID_ARGUMENT, "search_in_files", pattern="")
    h.refused(ErrorCode.OUTSIDE_WORKSPACE, "search_in_files", pattern="root", path="/etc")


def test_search_never_reads_through_links(project, tmp_path):
    (tmp_path / "outside.txt").write_text("-v secret\n")
    os.symlink(tmp_path / "outside.txt", project / "link.txt")
    os.symlink(project / "README.md", project / "inner.md")
    ws = Workspace(project)
    for engine in ("python", "rg"):
        found = search(ws, "secret|-v", engine=engine)
        assert "link.txt" not in {h.path for h in found.hits} and "inner.md" not in {h.path for h in found.hits}
        assert found.skipped["links resolving outside the workspace"] == 1


def test_check_syntax(project):
    (project / "bad.py").write_text("def f(:\n")
    (project / "data.json").write_text('{"a": 1,}')
    (project / "ok.json").write_text('{"a": 1}')
    (project / "notes.rst").write_text("x\n")
    h = Harness(project)
    assert h.call("check_syntax", path="app/main.py").ok
    bad = h.refused(ErrorCode.SYNTAX_ERROR, "check_syntax", path="bad.py")
    assert "line 1" in bad.observation
    assert h.call("check_syntax", path="ok.json").ok
    h.refused(ErrorCode.SYNTAX_ERROR, "check_syntax", path="data.json")
    h.refused(ErrorCode.CHECKER_UNAVAILABLE, "check_syntax", path="notes.rst")


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_check_syntax_javascript_with_node(project):
    (project / "ok.js").write_text("const a = 1;\nmodule.exports = { a };\n")
    (project / "esm.mjs").write_text("export const b = 2;\n")
    (project / "bad.js").write_text("let x = ;\n")
    h = Harness(project)
    assert h.call("check_syntax", path="ok.js").ok
    assert h.call("check_syntax", path="esm.mjs").ok
    bad = h.refused(ErrorCode.SYNTAX_ERROR, "check_syntax", path="bad.js")
    assert "SyntaxError" in bad.observation
