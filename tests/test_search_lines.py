"""search's ripgrep path at line level: ripgrep's line offsets pick which lines RE2 checks in the
fenced read, and every answer is the pure-Python one (CRLF, several hits a file, no final newline,
files changed after ripgrep read them, names ripgrep's output cannot carry, patterns where the two
engines could differ)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernel_ext.tools import search as search_module
from kernel_ext.tools.search import line_safe, search
from kernel_ext.workspace import Workspace

pytestmark = pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "many.py").write_text("".join(f"def compute_{n}(self): return {n}\n" for n in range(30)))
    (root / "pkg" / "crlf.txt").write_bytes(b"alpha compute\r\nbeta\r\ngamma compute\r\n")
    (root / "pkg" / "tail.txt").write_text("first\nlast compute")  # no final newline
    (root / "pkg" / "uni.txt").write_text("café compute é\nnaïve\n")
    (root / "pkg" / "blob.bin").write_bytes(b"compute\x00binary")
    (root / "pkg" / "latin.txt").write_bytes("caf\xe9 compute\n".encode("latin-1"))
    (root / "empty.txt").write_text("")
    return root


def agree(ws: Workspace, pattern: str) -> search_module.SearchResult:
    by_python = search(ws, pattern, engine="python")
    by_rg = search(ws, pattern, engine="rg")
    assert by_rg.engine == "rg"
    assert by_rg.hits == by_python.hits
    assert (by_rg.total, by_rg.files_matched, by_rg.skipped) == (by_python.total, by_python.files_matched, by_python.skipped)
    return by_rg


@pytest.mark.parametrize("pattern", ["compute", r"compute_\d+\(self", "^gamma", "é$", r"compute\b", r"\W", "(?i)ALPHA", "e", "x*"])
def test_line_level_answers_equal_the_full_scan(tree, monkeypatch, pattern):
    listed: list[object] = []
    original = search_module._listed_lines

    def spy(data, offsets):
        out = original(data, offsets)
        listed.append(out)
        return out

    monkeypatch.setattr(search_module, "_listed_lines", spy)
    found = agree(Workspace(tree), pattern)
    if line_safe(pattern):
        assert found.total and listed and all(out is not None for out in listed)  # the line path really ran
        assert sum(len(out) for out in listed) >= found.total
    else:
        assert listed == []  # ripgrep only picked files; RE2 read every line of them


def test_a_file_changed_after_ripgrep_read_it_is_read_whole(tree, monkeypatch):
    target = tree / "pkg" / "tail.txt"
    original = search_module.run_rg

    def then_rewrite(argv, fd):
        proc = original(argv, fd)
        with open(target, "r+b") as handle:  # in place: no folder's stamp changes
            handle.truncate(0)
            handle.write(b"x\nlonger first line\nlast compute\nmore compute\n")
        return proc

    monkeypatch.setattr(search_module, "run_rg", then_rewrite)
    found = search(Workspace(tree), "compute", engine="rg")
    assert found.engine == "rg"
    assert [(h.line, h.text) for h in found.hits if h.path == "pkg/tail.txt"] == [(3, "last compute"), (4, "more compute")]


def test_a_line_ripgrep_flagged_is_shown_only_if_re2_matches_the_fenced_text(tree, monkeypatch):
    target = tree / "pkg" / "crlf.txt"
    original = search_module.run_rg

    def then_rewrite(argv, fd):
        proc = original(argv, fd)
        with open(target, "r+b") as handle:  # same line starts, other words
            handle.write(b"alpha XXXXXXX\r\nbeta\r\ngamma compute\r\n")
        return proc

    monkeypatch.setattr(search_module, "run_rg", then_rewrite)
    found = search(Workspace(tree), "compute", engine="rg")
    assert [(h.line, h.text) for h in found.hits if h.path == "pkg/crlf.txt"] == [(3, "gamma compute")]


def test_a_name_ripgrep_output_cannot_carry_falls_back_to_the_fenced_scan(tree):
    (tree / "pkg" / "odd\nname.txt").write_text("compute here\n")
    ws = Workspace(tree)
    found = search(ws, "compute", engine="rg")
    assert found.engine == search_module.RG_FALLBACK
    assert "pkg/odd\nname.txt" in {h.path for h in found.hits}
    assert found.total == search(ws, "compute", engine="python").total


def test_parse_rg_lines_refuses_any_record_it_cannot_read():
    ok = search_module.parse_rg_lines(b"./a/b.py\x001:0:[Omitted long matching line]\n./a/b.py\x003:14:x:y\n")
    assert ok == {"a/b.py": [0, 14]}
    assert search_module.parse_rg_lines(b"") == {}
    for bad in (b"./a\n./a\x001:0:x\n", b"./a\x001:0:x", b"./a\x00x:0:y\n", b"./a\x001:-1:y\n", b"./a\x001\n"):
        assert search_module.parse_rg_lines(bad) is None, bad


@pytest.mark.parametrize(
    ("pattern", "safe"),
    [("compute", True), (r"def compute\(self", True), ("(?:a|b)c", True), ("(?P<x>a)", True), ("^x", True), ("café", True),
     ("x$", False), (r"\bx", False), (r"x\B", False), (r"\Ax", False), (r"x\z", False), (r"\W", False), (r"\D", False),
     (r"\S", False), ("(?i)x", False), ("(?s).", False)],
)  # fmt: skip
def test_line_safe_names_the_patterns_where_ripgrep_could_see_fewer_lines(pattern, safe):
    assert line_safe(pattern) is safe
