"""Walking the fence: what is listed, what is skipped and counted, what is never entered."""

from __future__ import annotations

import os
from pathlib import Path

from kernel_ext.workspace import Walker, Workspace, similar_paths


def _tree(root: Path, outside: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("x = 1\n")
    (root / "src" / "util.py").write_text("y = 2\n")
    (root / ".besser").mkdir()
    (root / ".besser" / "run.json").write_text("{}")
    (root / ".besser_command_output").mkdir()
    (root / ".besser_command_output" / "cmd-1.log").write_text("error: boom\n")
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "index.js").write_text("module.exports = 1\n")
    (root / ".main.py.besser-tmp-abc123").write_text("half")
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    os.symlink(outside / "secret.txt", root / "out_link")
    os.symlink(outside / "missing", root / "dangling")
    os.symlink("src/main.py", root / "in_link")
    os.mkfifo(root / "fifo")


def test_listing_skips_and_counts(tmp_path):
    root = tmp_path / "p"
    _tree(root, tmp_path / "outside")
    walker = Walker(Workspace(root))
    entries = {e.path: e for e in walker}
    assert sorted(entries) == ["in_link", "node_modules", "src", "src/main.py", "src/util.py"]
    assert entries["in_link"].kind == "link" and entries["in_link"].target == "src/main.py"
    assert walker.not_descended == ["node_modules"]
    assert walker.skipped == {
        "internal folders": 1,
        "command output folder": 1,
        "publish temporaries": 1,
        "links resolving outside the workspace": 2,
        "FIFOs, sockets and devices": 1,
    }


def test_explicit_start_inside_a_skipped_folder_is_walked(tmp_path):
    root = tmp_path / "p"
    _tree(root, tmp_path / "outside")
    ws = Workspace(root)
    assert [e.path for e in Walker(ws, ".besser_command_output")] == [".besser_command_output/cmd-1.log"]
    assert [e.path for e in Walker(ws, "node_modules")] == ["node_modules/pkg", "node_modules/pkg/index.js"]


def test_scan_cap_marks_the_walk_incomplete(tmp_path):
    for i in range(30):
        (tmp_path / f"f{i:02}.txt").write_text("x")
    walker = Walker(Workspace(tmp_path), scan_cap=10)
    assert len(list(walker)) == 10 and walker.complete is False


def test_similar_paths_suggest_without_substituting(tmp_path):
    root = tmp_path / "p"
    _tree(root, tmp_path / "outside")
    ws = Workspace(root)
    assert similar_paths(ws, "src/mian.py")[0] == "src/main.py"
    assert "src/main.py" in similar_paths(ws, "main.py")
    assert similar_paths(ws, "completely/different.txt") == []
