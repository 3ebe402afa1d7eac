"""Publish and remove when something happens between their steps, on a real folder.

Each test acts at one exact moment inside ``publish``/``remove``: a file swapped in while the
temporary is written, a name that appears right before the create-only ``link``, a swap
right before ``remove`` renames the name aside. Disk-level faults are injected as the exact
``OSError`` the kernel returns (labelled fault injection): ``link`` failing with ``EPERM``
is what a filesystem without hard links (vfat, some network mounts) answers; ``ENOSPC``/``EROFS``
are a full or read-only disk; a short ``write`` is legal POSIX. Every refusal also checks the
folder: the swapped-in file is intact and no temporary is left (or, where the code says it
keeps one, exactly that one).
"""

from __future__ import annotations

import errno
import importlib
import os
import re
import stat

import pytest
from file_tool_helpers import tree_state

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import Workspace, snapshot
from kernel_ext.workspace.publish import TEMP_MARKER, publish, remove

publish_module = importlib.import_module("kernel_ext.workspace.publish")  # the package exports a function of that name


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("OLD = 1\n")
    return root


def names(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def refused(fn, *args, **kwargs) -> ToolFailure:
    with pytest.raises(ToolFailure) as failure:
        fn(*args, **kwargs)
    return failure.value


def replace_with(path, text: str) -> None:
    """Another process replacing (or creating) ``path`` with a new file (a new inode)."""
    path.unlink(missing_ok=True)
    path.write_text(text)


def around_write_all(monkeypatch, before=None, after=None):
    """Act inside ``publish``: just before and just after the temporary is written."""
    real = publish_module._write_all

    def hooked(fd, data, mode):
        if before:
            before(fd)
        real(fd, data, mode)
        if after:
            after(fd)

    monkeypatch.setattr(publish_module, "_write_all", hooked)


# -- the temporary, and the last identity check before the rename ------------------------------


def test_the_temporary_is_private_until_its_bits_are_set(folder, monkeypatch):
    (folder / "app.py").chmod(0o664)
    (folder / "new.py").write_text("x")
    (folder / "new.py").unlink()
    modes = []
    around_write_all(monkeypatch, before=lambda fd: modes.append(stat.S_IMODE(os.fstat(fd).st_mode)))
    old_umask = os.umask(0o022)
    try:
        publish(Workspace(folder), "app.py", b"NEW\n")
        publish(Workspace(folder), "new.py", b"NEW\n", expected=None)
    finally:
        os.umask(old_umask)
    assert modes == [0o600, 0o644]  # a replacement's temporary is 0600 until fchmod gives it 0664
    assert stat.S_IMODE(os.stat(folder / "app.py").st_mode) == 0o664


@pytest.mark.parametrize("expected_state", ["existing", "new"])
def test_a_target_swapped_while_the_temporary_is_written_is_stale_and_kept(folder, monkeypatch, expected_state):
    ws = Workspace(folder)
    target = folder / ("app.py" if expected_state == "existing" else "late.py")
    expected = snapshot(ws, "app.py").identity if expected_state == "existing" else None
    around_write_all(monkeypatch, after=lambda fd: replace_with(target, "SOMEONE ELSE\n"))
    failure = refused(publish, ws, target.name, b"MINE\n", expected=expected)
    assert failure.code == ErrorCode.STALE_INPUT
    assert failure.message == f"{target.name!r} changed while it was being written"
    assert target.read_text() == "SOMEONE ELSE\n"
    assert not [n for n in names(folder) if TEMP_MARKER in n]


@pytest.mark.parametrize(("depth", "gone_name", "how"), [
    ("pkg/app.py", "pkg", "renamed_away"), ("pkg/app.py", "pkg", "deleted"),
    ("pkg/sub/app.py", "pkg", "renamed_away"), ("pkg/sub/app.py", "pkg", "deleted"),
    ("pkg/sub/app.py", "pkg/sub", "renamed_away"), ("pkg/sub/app.py", "pkg/sub", "deleted"),
])
def test_a_folder_taken_away_since_the_read_is_stale_and_not_made_again(folder, depth, gone_name, how):
    """An edit of a file whose folder went away since it was read refuses, and creates no folder.

    Under load the tools' race test once saw a refused edit leave an empty folder where one had
    just been renamed aside: the write made the missing folders that only a new file may make.
    """
    (folder / depth).parent.mkdir(parents=True)
    (folder / depth).write_text("OLD = 1\n")
    ws = Workspace(folder)
    checked = snapshot(ws, depth).identity
    gone = folder / gone_name
    if how == "renamed_away":
        gone.rename(folder / "aside")
    else:
        for path in sorted(gone.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        gone.rmdir()
    before = tree_state(folder)
    failure = refused(publish, ws, depth, b"NEW = 2\n", expected=checked)
    assert (failure.code, failure.message) == (ErrorCode.STALE_INPUT, f"{depth!r} was deleted since it was read")
    assert tree_state(folder) == before  # no folder made again, no temporary, the moved folder untouched


@pytest.mark.parametrize("expected_state", ["new", "any"])
def test_a_new_file_still_makes_its_folders(folder, expected_state):
    expected = {"new": None, "any": publish_module.ANY_VERSION}[expected_state]
    done = publish(Workspace(folder), "made/here/new.py", b"NEW\n", expected=expected)
    assert done.created and (folder / "made/here/new.py").read_text() == "NEW\n"


def test_a_short_write_is_continued_until_every_byte_is_written(folder, monkeypatch):
    real_write = os.write
    calls = []

    def short_write(fd, data):
        calls.append(len(data))
        return real_write(fd, bytes(data[:3]))  # legal: write may take fewer bytes than given

    monkeypatch.setattr(os, "write", short_write)
    publish(Workspace(folder), "app.py", b"0123456789\n")
    monkeypatch.undo()
    assert (folder / "app.py").read_bytes() == b"0123456789\n"
    assert len(calls) == 4


# -- create-only placement: link, and the fallback where hard links do not exist --------------


def failing_link(monkeypatch, error: int, before=None):
    """``os.link`` of a publish temporary fails with ``error`` (fault injection), after ``before`` ran."""
    real_link = os.link

    def link(src, dst, *args, **kwargs):
        if TEMP_MARKER in str(src) and not str(dst).startswith("."):
            if before:
                before()
            raise OSError(error, os.strerror(error))
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", link)


@pytest.mark.parametrize("error", [errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK])
def test_without_hard_links_a_new_file_is_placed_by_rename(folder, monkeypatch, error):
    failing_link(monkeypatch, error)
    done = publish(Workspace(folder), "sub/new.py", b"NEW\n", expected=None)
    assert done.created and done.path == "sub/new.py"
    assert (folder / "sub" / "new.py").read_bytes() == b"NEW\n"
    assert done.identity.ino == os.stat(folder / "sub" / "new.py").st_ino
    assert names(folder / "sub") == ["new.py"]


def test_without_hard_links_a_file_that_appeared_is_still_not_clobbered(folder, monkeypatch):
    target = folder / "new.py"
    failing_link(monkeypatch, errno.EPERM, before=lambda: target.write_text("SOMEONE ELSE\n"))
    monkeypatch.chdir(folder.parent)  # a check that forgot its directory descriptor would look here
    failure = refused(publish, Workspace(folder), "new.py", b"MINE\n", expected=None)
    assert failure.code == ErrorCode.ALREADY_EXISTS
    assert failure.message == "'new.py' appeared while it was being written"
    assert target.read_text() == "SOMEONE ELSE\n"
    assert names(folder) == ["app.py", "new.py"]


def test_a_name_that_appears_right_before_the_link_is_not_clobbered(folder, monkeypatch):
    target = folder / "new.py"
    real_link = os.link

    def link(src, dst, *args, **kwargs):
        if TEMP_MARKER in str(src):
            target.write_text("SOMEONE ELSE\n")
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", link)
    failure = refused(publish, Workspace(folder), "new.py", b"MINE\n", expected=None)
    assert failure.code == ErrorCode.ALREADY_EXISTS
    assert failure.message == "'new.py' appeared while it was being written"
    assert target.read_text() == "SOMEONE ELSE\n"
    assert names(folder) == ["app.py", "new.py"]


def test_another_link_failure_is_a_named_disk_failure(folder, monkeypatch):
    failing_link(monkeypatch, errno.ENOSPC)
    failure = refused(publish, Workspace(folder), "new.py", b"MINE\n", expected=None)
    assert failure.code == ErrorCode.EXECUTION_FAILED
    assert failure.message == "writing 'new.py' failed: No space left on device"
    assert names(folder) == ["app.py"]


# -- disk-level failures at each step are named for the file -----------------------------------


def fail_call(monkeypatch, name: str, error: int, when=lambda *a: True):
    real = getattr(os, name)

    def failing(*args, **kwargs):
        if when(*args):
            raise OSError(error, os.strerror(error))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)


def is_temp(path, *rest) -> bool:
    return TEMP_MARKER in str(path)


@pytest.mark.parametrize(
    "call, error, words",
    [
        ("open", errno.EROFS, "Read-only file system"),  # the temporary cannot be created
        ("write", errno.ENOSPC, "No space left on device"),  # nor filled
        ("rename", errno.EIO, "Input/output error"),  # nor renamed over the target
    ],
)
def test_a_disk_failure_while_publishing_is_named_and_changes_nothing(folder, monkeypatch, call, error, words):
    fail_call(monkeypatch, call, error, when=(lambda *a: True) if call == "write" else is_temp)
    failure = refused(publish, Workspace(folder), "app.py", b"NEW\n")
    monkeypatch.undo()
    assert failure.code == ErrorCode.EXECUTION_FAILED
    assert failure.message == f"writing 'app.py' failed: {words}"
    assert (folder / "app.py").read_text() == "OLD = 1\n"
    assert names(folder) == ["app.py"]


def test_a_disk_failure_while_removing_is_named_and_deletes_nothing(folder, monkeypatch):
    fail_call(monkeypatch, "rename", errno.EROFS, when=lambda src, dst, *a: src == "app.py")
    failure = refused(remove, Workspace(folder), "app.py")
    monkeypatch.undo()
    assert failure.code == ErrorCode.EXECUTION_FAILED
    assert failure.message == "writing 'app.py' failed: Read-only file system"
    assert names(folder) == ["app.py"] and (folder / "app.py").read_text() == "OLD = 1\n"


# -- remove: whatever sat at the name when it was renamed aside is what is judged --------------


def swap_before_rename_aside(monkeypatch, swap):
    """Act inside ``remove``: after its checks, right before the name is renamed aside."""
    real = publish_module._temp_name

    def hooked(loc):
        swap()
        return real(loc)

    monkeypatch.setattr(publish_module, "_temp_name", hooked)


def test_a_file_swapped_in_before_the_rename_aside_is_put_back(folder, monkeypatch):
    ws = Workspace(folder)
    checked = snapshot(ws, "app.py").identity
    swap_before_rename_aside(monkeypatch, lambda: replace_with(folder / "app.py", "SOMEONE ELSE\n"))
    failure = refused(remove, ws, "app.py", expected=checked)
    assert failure.code == ErrorCode.STALE_INPUT
    assert failure.message == "'app.py' was replaced while it was being deleted; nothing deleted"
    assert names(folder) == ["app.py"] and (folder / "app.py").read_text() == "SOMEONE ELSE\n"


def test_a_link_to_the_checked_file_swapped_in_is_put_back_as_a_link(folder, tmp_path, monkeypatch):
    """The link leads to the very file checked (a second hard link outside): judged as a link, not followed."""
    ws = Workspace(folder)
    checked = snapshot(ws, "app.py").identity
    outside = tmp_path / "outside.py"

    def swap():
        os.link(folder / "app.py", outside)  # same inode, same identity
        (folder / "app.py").unlink()
        os.symlink(outside, folder / "app.py")

    swap_before_rename_aside(monkeypatch, swap)
    failure = refused(remove, ws, "app.py", expected=checked)
    assert failure.code == ErrorCode.STALE_INPUT
    assert (folder / "app.py").is_symlink() and os.readlink(folder / "app.py") == str(outside)
    assert names(folder) == ["app.py"]
    assert outside.read_text() == "OLD = 1\n" and os.stat(outside).st_nlink == 1


def test_a_put_back_that_finds_the_name_taken_again_keeps_the_entry_aside_and_says_where(folder, monkeypatch):
    ws = Workspace(folder)
    checked = snapshot(ws, "app.py").identity
    swap_before_rename_aside(monkeypatch, lambda: replace_with(folder / "app.py", "SECOND\n"))
    real_link = os.link

    def link(src, dst, *args, **kwargs):
        if TEMP_MARKER in str(src):
            (folder / "app.py").write_text("THIRD\n")  # the name is taken again before the put-back
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", link)
    failure = refused(remove, ws, "app.py", expected=checked)
    assert failure.code == ErrorCode.STALE_INPUT
    kept = [n for n in names(folder) if TEMP_MARKER in n]
    assert len(kept) == 1 and (folder / kept[0]).read_text() == "SECOND\n"
    assert failure.message == f"'app.py' was replaced while it was being deleted; the entry found is kept as {kept[0]!r}"
    assert re.fullmatch(r"\.app\.py\.besser-tmp-[0-9a-f]+", kept[0])
    assert (folder / "app.py").read_text() == "THIRD\n"


def test_without_hard_links_a_failed_rename_is_a_named_disk_failure(folder, monkeypatch):
    failing_link(monkeypatch, errno.EPERM)
    fail_call(monkeypatch, "rename", errno.EIO, when=is_temp)
    failure = refused(publish, Workspace(folder), "new.py", b"MINE\n", expected=None)
    monkeypatch.undo()
    assert failure.code == ErrorCode.EXECUTION_FAILED
    assert failure.message == "writing 'new.py' failed: Input/output error"
    assert names(folder) == ["app.py"]
