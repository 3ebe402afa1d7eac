"""Atomic publish and guarded delete: crashes, stale identities, hard links, modes, races."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from file_tool_helpers import Harness, tree_state

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import (
    Identity,
    Walker,
    Workspace,
    file_lock,
    publish,
    remove,
    snapshot,
)
from kernel_ext.workspace.publish import TEMP_MARKER

REPO = Path(__file__).resolve().parents[1]


def test_publish_replaces_atomically_and_keeps_the_exact_mode(tmp_path):
    target = tmp_path / "run.sh"
    target.write_text("old\n")
    os.chmod(target, 0o664)
    ws = Workspace(tmp_path)
    old_umask = os.umask(0o022)
    try:
        shot = snapshot(ws, "run.sh")
        published = publish(ws, "run.sh", b"new\n", expected=shot.identity)
    finally:
        os.umask(old_umask)
    assert target.read_bytes() == b"new\n"
    assert oct(os.stat(target).st_mode & 0o777) == oct(0o664)
    assert published.identity == Identity.of(os.stat(target))
    assert not [p for p in tmp_path.iterdir() if TEMP_MARKER in p.name]


def test_crash_between_temp_write_and_rename_leaves_the_old_file(tmp_path):
    """A child process writes through publish and dies (os._exit) where rename would happen."""
    (tmp_path / "model.py").write_text("OLD = 1\n")
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(REPO)!r})
        from kernel_ext.workspace import Workspace, publish, snapshot
        ws = Workspace({str(tmp_path)!r})
        shot = snapshot(ws, "model.py")
        os.rename = lambda *a, **k: os._exit(17)  # the crash, between temp fsync and rename
        publish(ws, "model.py", b"NEW = 2\\n" * 1000, expected=shot.identity)
        os._exit(0)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, check=False)
    assert proc.returncode == 17, proc.stderr.decode()
    assert (tmp_path / "model.py").read_text() == "OLD = 1\n"
    leftovers = [p.name for p in tmp_path.iterdir() if TEMP_MARKER in p.name]
    assert len(leftovers) == 1 and leftovers[0].startswith(".model.py")  # the hidden temporary
    listed = [e.path for e in Walker(Workspace(tmp_path))]
    assert listed == ["model.py"]  # listing skips publish temporaries


def test_stale_identity_is_refused_without_writing(tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    ws = Workspace(tmp_path)
    shot = snapshot(ws, "a.txt")
    (tmp_path / "a.txt").write_text("two, longer\n")
    before = tree_state(tmp_path)
    with pytest.raises(ToolFailure) as info:
        publish(ws, "a.txt", b"three\n", expected=shot.identity)
    assert info.value.code == ErrorCode.STALE_INPUT
    assert tree_state(tmp_path) == before


def test_create_only_never_clobbers_a_file_that_appeared(tmp_path):
    ws = Workspace(tmp_path)
    (tmp_path / "late.txt").write_text("someone else\n")
    before = tree_state(tmp_path)
    with pytest.raises(ToolFailure) as info:
        publish(ws, "late.txt", b"mine\n", expected=None)
    assert info.value.code == ErrorCode.ALREADY_EXISTS
    assert tree_state(tmp_path) == before


def test_hard_linked_targets_are_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "shared.py").write_text("SHARED = 1\n")
    os.link(outside / "shared.py", root / "shared.py")
    h = Harness(root)
    h.read("shared.py")
    h.refused(ErrorCode.HARD_LINK_REFUSED, "modify_file", outside, path="shared.py", old_text="1", new_text="2")
    h.refused(ErrorCode.HARD_LINK_REFUSED, "write_file", outside, path="shared.py", content="SHARED = 3\n")


def test_remove_puts_back_a_file_swapped_in_after_the_check(tmp_path, monkeypatch):
    (tmp_path / "gone.txt").write_text("checked\n")
    ws = Workspace(tmp_path)
    shot = snapshot(ws, "gone.txt")
    real_rename = os.rename

    def swap_then_rename(src, dst, *args, **kwargs):
        if src == "gone.txt":
            (tmp_path / "gone.txt").unlink()
            (tmp_path / "gone.txt").write_text("someone else's file\n")
        return real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", swap_then_rename)
    with pytest.raises(ToolFailure) as info:
        remove(ws, "gone.txt", expected=shot.identity)
    assert info.value.code == ErrorCode.STALE_INPUT
    assert (tmp_path / "gone.txt").read_text() == "someone else's file\n"
    assert [p.name for p in tmp_path.iterdir()] == ["gone.txt"]


def test_publish_creates_missing_folders_inside_the_fence(tmp_path):
    ws = Workspace(tmp_path)
    publish(ws, "a/b/c.txt", b"deep\n", expected=None)
    assert (tmp_path / "a" / "b" / "c.txt").read_bytes() == b"deep\n"


def test_file_lock_is_reentrant_and_times_out_for_others(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    ws = Workspace(tmp_path)
    loc = ws.locate("f.txt")
    held, release, outcome = threading.Event(), threading.Event(), []

    def holder() -> None:
        with file_lock(loc), file_lock(loc):  # re-entrant in one thread
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(10)
    try:
        with file_lock(ws.locate("./f.txt"), wait=0.05):
            outcome.append("acquired")
    except ToolFailure as exc:
        outcome.append(exc.code)
    release.set()
    thread.join(10)
    assert outcome == [ErrorCode.FILE_BUSY]
    with file_lock(loc, wait=1):
        pass
