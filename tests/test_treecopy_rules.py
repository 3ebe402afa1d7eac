"""The tree copier's own rules, on real folders: what a copy and a sync keep, count and never touch.

``copy_tree`` keeps modes and times, copies a link as its text and never a FIFO, stops at the
depth bound, and under a budget copies a hard-linked file once (its other names, nested or not,
become links to the copy). ``clone_file`` keeps holes as holes and never copies past the size it
was charged at, also where ``copy_file_range`` refuses (ext4 into tmpfs: ``EXDEV``, the read and
write fallback). ``sync_tree`` makes the destination hold exactly the source (types changed,
extras removed, modes fixed, skipped names untouched), and with ``apply=False`` only counts.
``remove_entry`` and ``remove_path`` remove a tree, read-only folders included, never through a link.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import treewalk
from kernel_ext.workspace.treebudget import TreeBudget, TreeLimits
from kernel_ext.workspace.treecopy import CopyStats, clone_file, copy_tree, remove_entry, remove_path, sync_tree

OLD = (1_600_000_000_123_456_789, 1_600_000_100_987_654_321)
MIB = 1 << 20


def _copy(src: Path, dst: Path, budget: TreeBudget | None = None, skip: frozenset[str] = frozenset()) -> CopyStats:
    stats = CopyStats()
    dst.mkdir()
    with treewalk.opened_dir(src) as a, treewalk.opened_dir(dst) as b:
        copy_tree(a, b, skip, stats, budget=budget)
    return stats


def _sync(src: Path, dst: Path | None, apply: bool = True, skip: frozenset[str] = frozenset()) -> CopyStats:
    stats = CopyStats()
    with treewalk.opened_dir(src) as a:
        if dst is None:
            sync_tree(a, None, skip, stats, apply=False)
        else:
            with treewalk.opened_dir(dst) as b:
                sync_tree(a, b, skip, stats, apply=apply)
    return stats


def _state(root: Path) -> dict[str, tuple]:
    """Every entry below ``root``: kind, mode, content or link text, mtime (for files and folders)."""
    out: dict[str, tuple] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        key = str(path.relative_to(root))
        if stat.S_ISLNK(st.st_mode):
            out[key] = ("link", os.readlink(path))
        elif stat.S_ISDIR(st.st_mode):
            out[key] = ("dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns)
        elif stat.S_ISREG(st.st_mode):
            out[key] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes(), st.st_mtime_ns)
        else:
            out[key] = ("special", stat.S_IFMT(st.st_mode))
    return out


def _sample(root: Path, outside: Path) -> None:
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "sub" / "b.bin").write_bytes(bytes(range(256)) * 10)
    (root / "sub" / "deeper" / "c").write_text("c")
    os.chmod(root / "sub" / "b.bin", 0o640)
    os.chmod(root / "a.txt", 0o751)
    (root / "to-outside").symlink_to(outside)
    (root / "sub" / "dangling").symlink_to("nowhere/at/all")
    os.mkfifo(root / "sub" / "pipe")
    os.mkfifo(root / "pipe2")
    for path in (root / "a.txt", root / "sub" / "b.bin", root / "sub" / "deeper" / "c", root / "sub" / "deeper"):
        os.utime(path, ns=OLD)
    os.chmod(root / "sub" / "deeper", 0o750)
    os.utime(root / "sub", ns=OLD)


def test_a_copy_keeps_modes_times_and_link_text_and_never_a_fifo(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host only")
    _sample(tmp_path / "src", outside)
    before = _state(tmp_path / "src")
    stats = _copy(tmp_path / "src", tmp_path / "dst")
    copied = _state(tmp_path / "dst")
    assert copied == {k: v for k, v in before.items() if k not in ("sub/pipe", "pipe2")}
    assert "sub/pipe" not in copied and "pipe2" not in copied and not (outside / "secret").with_name("dst").exists()
    assert (stats.files, stats.dirs, stats.links, stats.specials, stats.hardlinked) == (3, 2, 2, 2, 0)
    assert stats.bytes == 6 + 2560 + 1
    assert stats.method == "copy" and stats.reflinked == 0
    assert _state(tmp_path / "src") == before


def test_a_copy_stops_at_the_depth_bound(tmp_path):
    src = tmp_path / "src"
    deep = src.joinpath(*[f"d{i}" for i in range(treewalk.MAX_DEPTH + 2)])
    deep.mkdir(parents=True)
    (src / "top").write_text("top")
    stats = _copy(src, tmp_path / "dst")
    dst = tmp_path / "dst"
    assert dst.joinpath(*[f"d{i}" for i in range(treewalk.MAX_DEPTH)]).is_dir()
    assert not dst.joinpath(*[f"d{i}" for i in range(treewalk.MAX_DEPTH + 1)]).exists()
    assert stats.dirs == treewalk.MAX_DEPTH and stats.files == 1


@pytest.mark.parametrize("budgeted", [True, False])
def test_under_a_budget_a_hard_linked_file_is_copied_once(tmp_path, budgeted):
    src = tmp_path / "src"
    (src / "x" / "y").mkdir(parents=True)
    (src / "x" / "y" / "first").write_bytes(b"shared" * 100)
    os.link(src / "x" / "y" / "first", src / "x" / "y" / "second")  # the same folder
    os.link(src / "x" / "y" / "first", src / "z-later")  # another folder, after it in the walk
    budget = TreeBudget(TreeLimits("checkpoint", 0, 0)) if budgeted else None
    stats = _copy(src, tmp_path / "dst", budget=budget)
    dst = tmp_path / "dst"
    inodes = {(dst / name).stat().st_ino for name in ("x/y/first", "x/y/second", "z-later")}
    assert all((dst / name).read_bytes() == b"shared" * 100 for name in ("x/y/first", "x/y/second", "z-later"))
    assert (len(inodes), stats.hardlinked, stats.files, stats.bytes) == ((1, 2, 3, 1800) if budgeted else (3, 0, 3, 1800))
    assert (dst / "x/y/first").stat().st_ino != (src / "x/y/first").stat().st_ino
    if budgeted:
        assert (budget.entries, budget.bytes) == (5, 1800)  # every name charged: two folders, three names


def test_a_budget_refuses_a_tree_past_it_before_writing_the_entry(tmp_path):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f").write_text("12345")
    (src / "l").symlink_to("d")
    for limits, made in ((TreeLimits("checkpoint", 0, 1), ["d"]), (TreeLimits("checkpoint", 4, 0), ["d"]),
                         (TreeLimits("checkpoint", 0, 2), ["d", "d/f"])):
        dst = tmp_path / f"dst-{limits.max_bytes}-{limits.max_files}"
        with pytest.raises(ToolFailure) as refused:
            _copy(src, dst, budget=TreeBudget(limits))
        assert refused.value.code == ErrorCode.TREE_TOO_LARGE
        assert sorted(str(p.relative_to(dst)) for p in dst.rglob("*")) == made  # the link past the limit not made


def _sparse(path: Path, pieces: dict[int, bytes], size: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for offset, data in pieces.items():
            os.pwrite(fd, data, offset)
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


@pytest.fixture(params=["same-filesystem", "tmpfs"])
def target_dir(request, tmp_path) -> Iterator[Path]:
    """Where copies go: beside the source (``copy_file_range``) or on tmpfs (``EXDEV``: read and write)."""
    if request.param == "same-filesystem":
        yield tmp_path / "out"
        return
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm here")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as folder:
        yield Path(folder) / "out"


def _expected(pieces: dict[int, bytes], size: int) -> bytes:
    data = bytearray(size)
    for offset, piece in pieces.items():
        data[offset:offset + len(piece)] = piece[:max(0, size - offset)]
    return bytes(data[:size])


@pytest.mark.parametrize("charged", [None, 5 * MIB + 3, 2 * MIB + 10, 3 * MIB, 3])  # 3 MiB: inside a hole, data after it
def test_a_clone_keeps_holes_and_never_passes_the_size_it_was_charged(tmp_path, target_dir, charged):
    pieces = {0: b"head" * 1000, 2 * MIB: b"middle" * 10, 5 * MIB: os.urandom(3 * MIB // 2)}
    size = 8 * MIB
    _sparse(tmp_path / "sparse", pieces, size)
    target_dir.mkdir()
    src = os.open(tmp_path / "sparse", os.O_RDONLY)
    out = os.open(target_dir / "copy", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        assert clone_file(src, out, charged) is False  # ext4 and tmpfs: no copy-on-write clone
    finally:
        os.close(src)
        os.close(out)
    wanted = size if charged is None else charged
    copy = target_dir / "copy"
    assert copy.stat().st_size == wanted
    assert copy.read_bytes() == _expected(pieces, wanted)
    data_bytes = sum(min(len(piece), max(0, wanted - offset)) for offset, piece in pieces.items())
    assert copy.stat().st_blocks * 512 <= data_bytes + 3 * MIB // 4 + 64 * 1024  # holes stay holes (block rounding aside)


def test_a_file_that_is_a_hole_to_its_end_copies_as_its_size(tmp_path, target_dir):
    _sparse(tmp_path / "holes", {}, 3 * MIB)
    (tmp_path / "empty").write_bytes(b"")
    target_dir.mkdir()
    for name in ("holes", "empty"):
        src = os.open(tmp_path / name, os.O_RDONLY)
        out = os.open(target_dir / name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            clone_file(src, out)
        finally:
            os.close(src)
            os.close(out)
        assert (target_dir / name).read_bytes() == (tmp_path / name).read_bytes()
    assert (target_dir / "holes").stat().st_blocks == 0


def test_a_copy_across_filesystems_is_the_same_bytes(tmp_path, target_dir):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "big").write_bytes(os.urandom(2 * MIB + 12345))
    (src / "small").write_text("small")
    stats = _copy(src, target_dir)
    assert (target_dir / "d" / "big").read_bytes() == (src / "d" / "big").read_bytes()
    assert (target_dir / "small").read_text() == "small"
    assert (stats.files, stats.bytes) == (2, 2 * MIB + 12345 + 5)


def _restore_pair(tmp_path: Path) -> tuple[Path, Path]:
    """A checkpoint-like source and a workspace that drifted from it in every way a sync mends."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "keep").mkdir(parents=True)
    (src / "keep" / "same").write_text("same bytes")
    (src / "keep" / "mode").write_text("mode only")
    os.chmod(src / "keep" / "mode", 0o600)
    (src / "changed").write_text("original")
    (src / "grown").write_text("short")
    (src / "was-dir").write_text("a file again")
    (src / "new-dir" / "inner").mkdir(parents=True)
    (src / "new-dir" / "inner" / "f").write_text("f")
    os.chmod(src / "new-dir", 0o750)
    os.utime(src / "new-dir", ns=OLD)
    (src / "link").symlink_to("keep/same")
    (src / "same-link").symlink_to("target")
    (dst / "keep").mkdir(parents=True)
    (dst / "keep" / "same").write_text("same bytes")
    (dst / "keep" / "mode").write_text("mode only")
    os.chmod(dst / "keep" / "mode", 0o644)
    (dst / "changed").write_text("edited!!")  # same size, other bytes
    (dst / "grown").write_text("longer now")
    (dst / "was-dir" / "x").mkdir(parents=True)
    (dst / "was-dir" / "x" / "y").write_text("y")
    os.chmod(dst / "was-dir" / "x", 0o500)
    (dst / "extra").write_text("made later")
    (dst / "extra-dir").mkdir()
    (dst / "link").symlink_to("elsewhere")
    (dst / "same-link").symlink_to("target")
    for side in (src, dst):  # unchanged files are left alone, their times with them
        for name in ("keep/same", "keep/mode"):
            os.utime(side / name, ns=OLD)
    (dst / ".ipynb_checkpoints").mkdir()
    (dst / ".ipynb_checkpoints" / "kept").write_text("skipped name")
    return src, dst


def test_a_dry_sync_counts_what_a_sync_does_and_changes_nothing(tmp_path):
    src, dst = _restore_pair(tmp_path)
    before = _state(dst)
    skip = frozenset({".ipynb_checkpoints"})
    dry = _sync(src, dst, apply=False, skip=skip)
    assert _state(dst) == before
    # files and links written; top entries removed (a folder once); same bytes or link text
    assert (dry.written, dry.removed, dry.unchanged) == (5, 3, 3)
    gone = _sync(src, None)
    assert (gone.written, gone.removed, gone.unchanged) == (8, 0, 0)
    done = _sync(src, dst, skip=skip)
    assert (done.written, done.removed, done.unchanged) == (dry.written, dry.removed, dry.unchanged)


def test_a_sync_makes_the_destination_hold_exactly_the_source(tmp_path):
    src, dst = _restore_pair(tmp_path)
    os.chmod(dst, 0o500)  # a folder the workspace made read-only is writable again for the restore
    _sync(src, dst, skip=frozenset({".ipynb_checkpoints"}))
    after = _state(dst)
    assert (dst / ".ipynb_checkpoints" / "kept").read_text() == "skipped name"
    assert {k: v for k, v in after.items() if not k.startswith(".ipynb_checkpoints")} == _state(src)
    assert not [p for p in dst.iterdir() if p.name.startswith(".besser-restore-")]
    assert stat.S_IMODE(dst.stat().st_mode) & 0o700 == 0o700
    again = _sync(src, dst, skip=frozenset({".ipynb_checkpoints"}))
    assert (again.written, again.removed, again.unchanged) == (0, 0, 8)


def test_a_sync_writes_a_file_through_no_link_in_the_destination(tmp_path):
    src, dst, outside = tmp_path / "src", tmp_path / "dst", tmp_path / "outside"
    for folder in (src, dst, outside):
        folder.mkdir()
    (outside / "victim").write_text("host")
    (src / "victim").write_text("from src")
    (dst / "victim").symlink_to(outside / "victim")
    _sync(src, dst)
    assert (outside / "victim").read_text() == "host"
    assert not (dst / "victim").is_symlink() and (dst / "victim").read_text() == "from src"


def test_remove_entry_removes_read_only_folders_and_never_follows_a_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    tree = tmp_path / "tree"
    (tree / "ro" / "inner").mkdir(parents=True)
    (tree / "ro" / "inner" / "f").write_text("f")
    (tree / "ro" / "link").symlink_to(outside)
    os.chmod(tree / "ro" / "inner", 0o500)
    os.chmod(tree / "ro", 0o500)
    with treewalk.opened_dir(tmp_path) as parent:
        remove_entry(parent, "tree", os.stat("tree", dir_fd=parent, follow_symlinks=False))
    assert not tree.exists() and (outside / "keep").read_text() == "keep"
    link = tmp_path / "a-link"
    link.symlink_to(outside)
    remove_path(link)
    assert not link.is_symlink() and (outside / "keep").exists()
    remove_path(tmp_path / "never-there")  # quietly nothing
    (tmp_path / "plain").write_text("x")
    remove_path(tmp_path / "plain")
    assert not (tmp_path / "plain").exists()


def _deep(root: Path, levels: int) -> Path:
    deep = root.joinpath(*[f"d{i}" for i in range(levels)])
    deep.mkdir(parents=True)
    (deep / "bottom").write_text("bottom")
    return deep


@pytest.mark.parametrize("existing", [False, True])
def test_a_sync_and_its_count_stop_at_the_depth_bound(tmp_path, existing):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _deep(src, treewalk.MAX_DEPTH + 2)
    for level in (1, treewalk.MAX_DEPTH - 1, treewalk.MAX_DEPTH):  # a file at the last levels a sync reaches and the first it does not
        (src.joinpath(*[f"d{i}" for i in range(level)]) / "f").write_text(str(level))
    dst.mkdir()
    if existing:
        _deep(dst, treewalk.MAX_DEPTH + 2)
    dry = _sync(src, dst, apply=False) if existing else _sync(src, None)
    assert dry.written == 2 and dry.removed == 0
    _sync(src, dst)
    reached = dst.joinpath(*[f"d{i}" for i in range(treewalk.MAX_DEPTH - 1)])
    assert (reached / "f").read_text() == str(treewalk.MAX_DEPTH - 1)
    assert not (reached / "d63" / "f").exists()


def test_a_sync_rewrites_a_file_that_differs_only_past_its_first_chunk(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    head = os.urandom(treewalk.CHUNK)
    (src / "f").write_bytes(head + b"source tail")
    (dst / "f").write_bytes(head + b"edited tail")
    dry = _sync(src, dst, apply=False)
    assert (dry.written, dry.unchanged) == (1, 0)
    _sync(src, dst)
    assert (dst / "f").read_bytes() == head + b"source tail"


def test_a_skipped_name_is_neither_copied_nor_synced_from_the_source(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / ".git").mkdir(parents=True)
    (src / ".git" / "HEAD").write_text("source")
    (src / "f").write_text("f")
    dst.mkdir()
    stats = _sync(src, dst, skip=frozenset({".git"}))
    assert sorted(p.name for p in dst.iterdir()) == ["f"] and stats.written == 1
    copied = _copy(src, tmp_path / "copy", skip=frozenset({".git"}))
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["f"] and copied.dirs == 0
