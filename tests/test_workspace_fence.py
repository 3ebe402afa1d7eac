"""The fence: lexical containment, no-follow walks, links swapped in between check and open."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from file_tool_helpers import Harness, tree_state

from kernel_ext.boundary import BoundaryEvent
from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import Workspace


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "project"
    outside = tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (root / "app.py").write_text("print('inside')\n")
    (root / "pkg" / "mod.py").write_text("X = 1\n")
    (outside / "secret.txt").write_text("TOP SECRET\n")
    return root, outside


def test_inside_paths_are_readable_and_outside_paths_refused(layout):
    root, outside = layout
    h = Harness(root)
    assert h.call("read_file", path="app.py").ok
    assert h.call("read_file", path=str(root / "pkg" / "mod.py")).ok  # absolute, inside
    assert h.call("read_file", path="pkg/../app.py").ok  # '..' that stays inside
    for path in ("../outside/secret.txt", "pkg/../../outside/secret.txt", str(outside / "secret.txt"), "/etc/passwd"):
        result = h.refused(ErrorCode.OUTSIDE_WORKSPACE, "read_file", outside, path=path)
        assert "TOP SECRET" not in result.observation


def test_writes_outside_are_refused_and_nothing_is_created(layout):
    root, outside = layout
    h = Harness(root)
    h.refused(ErrorCode.OUTSIDE_WORKSPACE, "write_file", outside, path="../outside/new.txt", content="x\n")
    h.refused(ErrorCode.OUTSIDE_WORKSPACE, "write_file", outside, path=str(outside / "secret.txt"), content="x\n")
    h.refused(ErrorCode.OUTSIDE_WORKSPACE, "delete_file", outside, path="../outside/secret.txt")


def test_extra_roots_are_inside_the_fence(layout):
    root, outside = layout
    ws = Workspace(root, [outside])
    assert ws.read_text(str(outside / "secret.txt")) == "TOP SECRET\n"
    with pytest.raises(ToolFailure) as info:
        ws.locate(str(outside.parent / "elsewhere.txt"))
    assert info.value.code == ErrorCode.OUTSIDE_WORKSPACE


def test_links_anywhere_in_a_path_are_refused(layout):
    root, outside = layout
    os.symlink(outside / "secret.txt", root / "leak.txt")
    os.symlink(outside, root / "linkdir")
    os.symlink(root / "app.py", root / "inner_link.py")  # even a link that stays inside
    h = Harness(root)
    for path in ("leak.txt", "linkdir/secret.txt", "inner_link.py"):
        result = h.refused(ErrorCode.SYMLINK_REFUSED, "read_file", outside, path=path)
        assert "TOP SECRET" not in result.observation
    h.refused(ErrorCode.SYMLINK_REFUSED, "write_file", outside, path="leak.txt", content="x\n")
    h.refused(ErrorCode.SYMLINK_REFUSED, "write_file", outside, path="linkdir/new.txt", content="x\n")
    h.refused(ErrorCode.SYMLINK_REFUSED, "delete_file", outside, path="leak.txt")
    h.refused(ErrorCode.SYMLINK_REFUSED, "modify_file", outside, path="leak.txt", old_text="TOP", new_text="NOT")


def test_special_files_are_refused_before_opening(layout):
    root, _ = layout
    os.mkfifo(root / "pipe")
    h = Harness(root)
    h.refused(ErrorCode.NOT_REGULAR_FILE, "read_file", path="pipe")  # would block forever if opened
    h.refused(ErrorCode.NOT_REGULAR_FILE, "write_file", path="pipe", content="x\n")
    h.refused(ErrorCode.NOT_REGULAR_FILE, "read_file", path="pkg")


def test_symlink_swapped_in_at_dispatch_is_not_followed(layout):
    """read_file has no approval: the observer swaps the file for a link right before it runs."""
    root, outside = layout

    def swap(event: BoundaryEvent) -> None:
        if event.kind == "dispatch":
            os.replace(root / "app.py", root / "app.py.bak")
            os.symlink(outside / "secret.txt", root / "app.py")

    h = Harness(root, observer=swap)
    result = h.call("read_file", path="app.py")
    assert not result.ok and result.error.code == ErrorCode.SYMLINK_REFUSED
    assert "TOP SECRET" not in result.observation


def test_symlink_swapped_in_during_approval_refuses_the_edit(layout):
    root, outside = layout
    target = root / "app.py"

    def approver(request) -> bool:
        os.replace(target, root / "moved.py")
        os.symlink(outside / "secret.txt", target)
        return True

    h = Harness(root, approver=approver)
    assert h.call("read_file", path="app.py").ok
    outside_before = tree_state(outside)
    result = h.call("modify_file", path="app.py", old_text="inside", new_text="pwned")
    assert not result.ok and result.error.code == ErrorCode.STALE_INPUT
    assert tree_state(outside) == outside_before
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert os.readlink(target) == str(outside / "secret.txt")


def test_directory_swapped_for_a_link_during_approval_refuses_the_write(layout):
    root, outside = layout

    def approver(request) -> bool:
        os.rename(root / "pkg", root / "pkg.old")
        os.symlink(outside, root / "pkg")
        return True

    h = Harness(root, approver=approver)
    before = tree_state(outside)
    result = h.call("write_file", path="pkg/new.py", content="X = 2\n")
    assert not result.ok and result.error.code in (ErrorCode.SYMLINK_REFUSED, ErrorCode.STALE_INPUT)
    assert tree_state(outside) == before


def test_swap_between_the_fences_check_and_its_open(layout, monkeypatch):
    """The leaf is swapped after the fence's lstat, right before its open: O_NOFOLLOW refuses it."""
    root, outside = layout
    ws = Workspace(root)
    real_open = os.open
    swapped = []

    def racing_open(path, flags, *args, **kwargs):
        if path == "app.py" and not swapped:
            swapped.append(True)
            os.replace(root / "app.py", root / "app.py.bak")
            os.symlink(outside / "secret.txt", root / "app.py")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", racing_open)
    with pytest.raises(ToolFailure) as info:
        ws.read_text("app.py")
    assert swapped and info.value.code == ErrorCode.SYMLINK_REFUSED


def test_internal_and_protected_paths(layout):
    root, _ = layout
    (root / ".besser").mkdir()
    (root / ".besser" / "state.json").write_text("{}")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    h = Harness(root)
    h.refused(ErrorCode.PROTECTED_PATH, "read_file", path=".besser/state.json")
    assert h.call("read_file", path=".git/config").ok  # protected: readable
    h.read(".git/config")
    h.refused(ErrorCode.PROTECTED_PATH, "write_file", path=".git/config", content="x\n")
    h.refused(ErrorCode.PROTECTED_PATH, "delete_file", path=".git/config")
    h.refused(ErrorCode.PROTECTED_PATH, "write_file", path=".git/hooks/pre-commit", content="x\n")
