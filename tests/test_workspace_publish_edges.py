"""Atomic publish and remove at their edges, called directly on a real folder (mutation testing found these unpinned).

What is refused at the target name (a link, a special file, a file deleted since it was
checked, a missing file to remove) with its code and words, and what a new or replaced file
ends up as (its mode, ``created``), with no temporary file left behind.
"""

from __future__ import annotations

import os
import stat

import pytest

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import Workspace
from kernel_ext.workspace.fence import Identity
from kernel_ext.workspace.publish import (
    is_temp_name,
    publish,
    remove,
    sweep_temporaries,
)


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f.py").write_text("a = 1\n")
    return Workspace(root)


def root(ws):
    return ws.roots[0]


def refused(fn, *args, **kwargs) -> ToolFailure:
    with pytest.raises(ToolFailure) as failure:
        fn(*args, **kwargs)
    return failure.value


def no_temporaries(ws) -> bool:
    return not [p for p in root(ws).rglob("*") if is_temp_name(p.name)]


def test_a_link_at_the_target_name_is_refused_and_left_alone(ws):
    (root(ws) / "link.py").symlink_to("f.py")
    failure = refused(publish, ws, "link.py", b"x = 2\n")
    assert (failure.code, failure.message) == (
        ErrorCode.SYMLINK_REFUSED, "'link.py' is a symbolic link; links are never written through")
    assert os.readlink(root(ws) / "link.py") == "f.py" and (root(ws) / "f.py").read_text() == "a = 1\n"
    assert no_temporaries(ws)


def test_a_special_file_at_the_target_name_is_refused(ws):
    os.mkfifo(root(ws) / "pipe")
    failure = refused(publish, ws, "pipe", b"x")
    assert (failure.code, failure.message) == (ErrorCode.NOT_REGULAR_FILE, "'pipe' is not a regular file")


def test_a_file_deleted_since_it_was_checked_is_stale(ws):
    checked = Identity.of(os.stat(root(ws) / "f.py"))
    (root(ws) / "f.py").unlink()
    failure = refused(publish, ws, "f.py", b"x", expected=checked)
    assert (failure.code, failure.message) == (ErrorCode.STALE_INPUT, "'f.py' was deleted since it was read")
    assert not (root(ws) / "f.py").exists() and no_temporaries(ws)


def test_removing_a_missing_file_is_named(ws):
    failure = refused(remove, ws, "gone.py")
    assert (failure.code, failure.message) == (ErrorCode.NOT_FOUND, "'gone.py' does not exist")


def test_new_files_get_the_default_mode_and_replaced_ones_keep_theirs(ws):
    old_umask = os.umask(0o022)
    try:
        made = publish(ws, "new.py", b"n = 1\n", expected=None)
        (root(ws) / "f.py").chmod(0o640)
        kept = publish(ws, "f.py", b"a = 2\n")
    finally:
        os.umask(old_umask)
    assert made.created is True and kept.created is False
    assert stat.S_IMODE(os.stat(root(ws) / "new.py").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(root(ws) / "f.py").st_mode) == 0o640
    assert kept.identity == Identity.of(os.stat(root(ws) / "f.py")) and no_temporaries(ws)


def test_sweeping_removes_only_temporaries_and_never_follows_links(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".x.besser-tmp-0123456789ab").write_text("not ours")
    (root(ws) / "sub").mkdir()
    (root(ws) / "sub" / ".f.py.besser-tmp-0123456789ab").write_text("left by a kill")
    (root(ws) / "elsewhere").symlink_to(outside, target_is_directory=True)
    (root(ws) / ".env").write_text("A=1\n")  # a dotfile, not a temporary
    (root(ws) / "notes.besser-tmp-1").write_text("a name, not hidden")
    assert sweep_temporaries(root(ws)) == [os.path.join("sub", ".f.py.besser-tmp-0123456789ab")]
    assert (outside / ".x.besser-tmp-0123456789ab").exists() and (root(ws) / "f.py").exists()
    assert (root(ws) / ".env").exists() and (root(ws) / "notes.besser-tmp-1").exists()


def test_expectations_that_no_longer_hold_are_named(ws):
    checked = Identity.of(os.stat(root(ws) / "f.py"))
    made = publish(ws, "n.py", b"n = 1\n", expected=None)
    assert made.path == "n.py"
    appeared = refused(publish, ws, "n.py", b"n = 2\n", expected=None)
    assert (appeared.code, appeared.message) == (ErrorCode.ALREADY_EXISTS, "'n.py' appeared since it was checked")
    (root(ws) / "f.py").write_text("a = 22\n")
    changed = refused(remove, ws, "f.py", expected=checked)
    assert (changed.code, changed.message) == (ErrorCode.STALE_INPUT, "'f.py' changed since it was read; read it again")
    assert (root(ws) / "f.py").read_text() == "a = 22\n" and (root(ws) / "n.py").read_text() == "n = 1\n"
