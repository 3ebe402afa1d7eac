"""Version snapshots over real files: what a snapshot records for each kind of entry, and how a change is named.

Every approval's recheck compares two of these (``boundary/executor.py``), so each field that
can tell two versions apart, and each named change, is pinned here (mutation testing found
them unguarded). The content-only change with the mtime put back is in ``test_audit_survivors``.
"""

from __future__ import annotations

import os

import pytest

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import Workspace
from kernel_ext.workspace.fence import Identity
from kernel_ext.workspace.versions import (
    SNAPSHOT_TEXT_LIMIT,
    FileSnapshot,
    require_unchanged,
    sha256_hex,
    snapshot,
)


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f.py").write_text("a = 1\n")
    return Workspace(root)


def root(ws: Workspace):
    return ws.roots[0]


def test_a_regular_file_is_recorded_whole(ws):
    shot = snapshot(ws, "f.py")
    st = os.stat(root(ws) / "f.py")
    assert shot == FileSnapshot("f.py", True, sha256_hex(b"a = 1\n"), Identity.of(st), "a = 1\n")
    assert snapshot(ws, ws.locate("f.py")) == shot  # a located path is the same file


def test_a_missing_file_is_recorded_as_missing(ws):
    assert snapshot(ws, "new.py") == FileSnapshot("new.py", exists=False)


@pytest.mark.parametrize(("make", "kind"), [
    (lambda p: p.symlink_to("f.py"), "symlink"),
    (lambda p: os.mkfifo(p), "mode prw"),
    (lambda p: p.mkdir(), "mode drwx"),
])
def test_other_entries_are_recorded_with_a_named_problem(ws, make, kind):
    path = root(ws) / "odd"
    make(path)
    shot = snapshot(ws, "odd")
    assert (shot.path, shot.exists, shot.sha256, shot.text) == ("odd", True, "", None)
    assert shot.identity == Identity.of(os.lstat(path))
    assert shot.problem.startswith(f"not a regular file ({kind}")


def test_a_path_the_fence_refuses_is_recorded_with_its_refusal(ws, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (root(ws) / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    shot = snapshot(ws, "linked/x.py")
    assert (shot.path, shot.exists, shot.identity) == ("linked/x.py", True, None)
    assert shot.problem.startswith(f"{ErrorCode.SYMLINK_REFUSED}: ")


def test_a_file_over_the_limit_keeps_its_identity_and_names_the_limit(ws):
    shot = snapshot(ws, "f.py", max_bytes=3)
    assert (shot.path, shot.exists, shot.sha256) == ("f.py", True, "")
    assert shot.identity == Identity.of(os.stat(root(ws) / "f.py"))
    assert shot.problem.startswith(f"{ErrorCode.TOO_LARGE}: ") and "limit 3" in shot.problem


def test_text_is_kept_for_display_only_when_small_and_utf8(ws):
    (root(ws) / "edge.txt").write_bytes(b"x" * SNAPSHOT_TEXT_LIMIT)
    (root(ws) / "over.txt").write_bytes(b"x" * (SNAPSHOT_TEXT_LIMIT + 1))
    (root(ws) / "binary.bin").write_bytes(b"\xff\xfe\x00")
    assert snapshot(ws, "edge.txt").text == "x" * SNAPSHOT_TEXT_LIMIT
    over, binary = snapshot(ws, "over.txt"), snapshot(ws, "binary.bin")
    assert over.text is None and over.sha256 == sha256_hex(b"x" * (SNAPSHOT_TEXT_LIMIT + 1))
    assert binary.text is None and binary.sha256 == sha256_hex(b"\xff\xfe\x00") and not binary.problem


def stale(ws: Workspace, before: FileSnapshot) -> str:
    with pytest.raises(ToolFailure) as refused:
        require_unchanged(ws, before)
    assert refused.value.code == ErrorCode.STALE_INPUT
    return refused.value.message


def test_an_unchanged_file_passes_and_the_fresh_look_is_returned(ws):
    before = snapshot(ws, "f.py")
    assert require_unchanged(ws, before) == before


@pytest.mark.parametrize(("change", "named"), [
    (lambda r: (r / "f.py").unlink(), "was deleted"),
    (lambda r: (r / "f.py").write_text("a = 2\n"), "content changed"),
    (lambda r: ((r / "f.py").unlink(), (r / "f.py").write_text("a = 1\n")), "was replaced (same content, different file identity)"),
    (lambda r: ((r / "f.py").unlink(), (r / "f.py").symlink_to("g.py")), "not a regular file (symlink)"),
])
def test_each_change_is_named(ws, change, named):
    before = snapshot(ws, "f.py")
    (root(ws) / "g.py").write_text("b = 1\n")
    change(root(ws))
    assert stale(ws, before) == f"'f.py' {named} since it was checked; read it again and make a new request"


def test_a_created_file_and_a_readable_again_file_are_named(ws):
    missing = snapshot(ws, "new.py")
    (root(ws) / "new.py").write_text("x\n")
    assert stale(ws, missing).startswith("'new.py' was created since it was checked")
    (root(ws) / "odd").symlink_to("f.py")
    linked = snapshot(ws, "odd")
    (root(ws) / "odd").unlink()
    (root(ws) / "odd").write_text("now a file\n")
    assert stale(ws, linked).startswith("'odd' is readable again since it was checked")
