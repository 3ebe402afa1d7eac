"""The fence's rules called directly on a real folder: each refusal's code and words, each limit's edge.

Mutation testing (``make mutation``, bench/MUTATION.md) showed these unpinned: the path-text
limits (4096 bytes a path, 255 a component, both inclusive), lexical containment with extra
roots, internal and protected prefixes, how a path is displayed, what ``lstat`` answers for a
missing or linked component, the read limit's edge and a file growing past it, and which
error a failed walk step becomes.
"""

from __future__ import annotations

import errno
import os
import stat

import pytest

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import Workspace
from kernel_ext.workspace.fence import (
    DIR_FLAGS,
    FILE_FLAGS,
    NAME_MAX_BYTES,
    PATH_MAX_BYTES,
    Identity,
    Location,
    check_path_text,
    open_regular_at,
)


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "app.py").write_text("print('inside')\n")
    (root / "pkg" / "mod.py").write_text("X = 1\n")
    extra = tmp_path / "extra"
    (extra / "deep").mkdir(parents=True)
    (extra / "deep" / "e.txt").write_text("extra\n")
    return root, extra


def refused(fn, *args, **kwargs) -> ToolFailure:
    with pytest.raises(ToolFailure) as failure:
        fn(*args, **kwargs)
    return failure.value


def test_the_open_flags_never_follow_never_wait_and_never_leak():
    for flags in (DIR_FLAGS, FILE_FLAGS):
        assert flags & os.O_NOFOLLOW and flags & os.O_CLOEXEC
        assert flags & (os.O_WRONLY | os.O_RDWR) == 0
    assert DIR_FLAGS & os.O_DIRECTORY and FILE_FLAGS & os.O_NONBLOCK


# -- path text ---------------------------------------------------------------------------------


def test_path_text_limits_are_4096_and_255_bytes_inclusive():
    assert (PATH_MAX_BYTES, NAME_MAX_BYTES) == (4096, 255)
    check_path_text("a" * 255)
    check_path_text("/".join(["a" * 255] * 16))  # 4095 bytes
    check_path_text("é" * 127 + "a")  # 255 bytes in UTF-8
    long_name = refused(check_path_text, "d/" + "a" * 256)
    assert long_name.code == ErrorCode.INVALID_ARGUMENT
    assert long_name.message == "a path component is longer than 255 bytes"
    assert refused(check_path_text, "é" * 128).message == "a path component is longer than 255 bytes"
    at_limit = "/".join(["a" * 200] * 20) + "/" + "a" * 76  # 4096 bytes
    assert len(at_limit.encode()) == 4096
    check_path_text(at_limit)
    too_long = refused(check_path_text, at_limit + "a")
    assert too_long.code == ErrorCode.INVALID_ARGUMENT and too_long.message == "path is longer than 4096 bytes"


@pytest.mark.parametrize(
    "text, words",
    [
        ("a\x00b", "path contains a NUL byte"),
        ("a\ud800b", "path is not valid Unicode text (a lone surrogate)"),
        ("", "path is empty"),
        ("  ", "path is empty"),
    ],
)
def test_unusable_path_text_is_named(tree, text, words):
    failure = refused(Workspace(tree[0]).locate, text)
    assert failure.code == ErrorCode.INVALID_ARGUMENT and failure.message == words


# -- locating, displaying, internal and protected ------------------------------------------------


def test_locate_maps_relative_and_absolute_paths_to_their_root(tree):
    root, extra = tree
    ws = Workspace(root, [extra])
    assert ws.roots == (root, extra)
    assert ws.locate("pkg/./mod.py") == Location(root, ("pkg", "mod.py"), "pkg/mod.py")
    assert ws.locate("pkg/../app.py") == Location(root, ("app.py",), "app.py")
    assert ws.locate(str(root)) == Location(root, (), ".")
    assert ws.locate(str(root / "pkg" / "mod.py")).parts == ("pkg", "mod.py")
    inside_extra = ws.locate(str(extra / "deep" / "e.txt"))
    assert inside_extra == Location(extra, ("deep", "e.txt"), str(extra / "deep" / "e.txt"))
    assert ws.read_text(inside_extra) == "extra\n"
    assert ws.locate(str(extra)).display == str(extra)
    assert Location(root, (), ".").name == "" and inside_extra.name == "e.txt"


def test_the_longest_matching_root_wins(tree):
    root, _ = tree
    nested = root / "pkg"
    ws = Workspace(root, [nested])
    assert ws.locate(str(nested / "mod.py")) == Location(nested, ("mod.py",), str(nested / "mod.py"))


@pytest.mark.parametrize("path", ["../x", "pkg/../../x", "/etc/passwd", "{root}/../outside"])
def test_outside_paths_are_named(tree, path):
    root, _ = tree
    text = path.format(root=root)
    failure = refused(Workspace(root).locate, text)
    assert failure.code == ErrorCode.OUTSIDE_WORKSPACE
    assert failure.message in (f"{text!r} escapes the workspace", f"{text!r} is outside the workspace roots")
    if text.startswith("/"):
        assert failure.message == f"{text!r} is outside the workspace roots"
    else:
        assert failure.message == f"{text!r} escapes the workspace"


def test_a_sibling_whose_name_starts_like_the_root_is_outside(tree, tmp_path):
    root, _ = tree
    (tmp_path / "project2").mkdir()
    failure = refused(Workspace(root).locate, str(tmp_path / "project2" / "f"))
    assert failure.code == ErrorCode.OUTSIDE_WORKSPACE


def test_a_root_that_is_not_a_directory_is_named(tree):
    root, _ = tree
    failure = refused(Workspace, root / "app.py")
    assert failure.code == ErrorCode.NOT_FOUND
    assert failure.message == f"workspace root {str(root / 'app.py')!r} is not a directory"


def test_internal_and_protected_prefixes_match_whole_components(tree):
    root, _ = tree
    ws = Workspace(root, internal=("./.state/",), protected=("/.git", "vendor/lib"))
    assert ws.internal == (".state",) and ws.protected == (".git", "vendor/lib")
    hidden = refused(ws.locate, ".state/x.json")
    assert hidden.code == ErrorCode.PROTECTED_PATH and hidden.message == "'.state/x.json' is an internal folder of the run"
    assert refused(ws.locate, ".state").code == ErrorCode.PROTECTED_PATH
    assert ws.locate(".statefile").parts == (".statefile",)  # a longer name is not under the prefix
    assert ws.is_internal(".state/a") and ws.is_internal(".state") and not ws.is_internal(".stateX/a")
    for path, protected in ((".git", True), (".git/config", True), (".github/ci.yml", False), ("vendor/lib/a.py", True),
                            ("vendor/library.py", False), ("vendor", False)):
        assert ws.is_protected(ws.locate(path)) is protected, path
    locked = refused(ws.check_writable, ws.locate(".git/config"))
    assert locked.code == ErrorCode.PROTECTED_PATH and locked.message == "'.git/config' is protected and cannot be changed"
    whole = refused(ws.check_writable, ws.locate("."))
    assert whole.code == ErrorCode.INVALID_ARGUMENT and whole.message == "cannot write the workspace root itself"
    ws.check_writable(ws.locate("pkg/new.py"))
    nothing = Workspace(root, internal=("",), protected=())
    assert not nothing.is_internal("") and not nothing.is_internal("app.py")


def test_the_default_internal_and_protected_folders(tree):
    ws = Workspace(tree[0])
    # the run's state is hidden; its spilled output, probe and probe state are read-only (workspace/internal.py)
    assert ws.internal == (".besser",)
    assert ws.protected == (".git", ".besser_command_output", ".besser_probe.py", ".besser_probe")


# -- lstat, directories, reading -----------------------------------------------------------------


def test_lstat_answers_for_the_entry_itself_and_none_when_missing(tree, tmp_path):
    root, _ = tree
    ws = Workspace(root)
    os.symlink(root / "app.py", root / "link.py")
    os.symlink(tmp_path, root / "linkdir")
    assert ws.lstat(".").st_ino == os.stat(root).st_ino
    assert stat.S_ISLNK(ws.lstat("link.py").st_mode)
    assert ws.lstat("app.py").st_ino == os.stat(root / "app.py").st_ino
    assert ws.lstat("missing.py") is None
    assert ws.lstat("nodir/missing.py") is None
    assert ws.lstat(ws.locate("pkg/mod.py")).st_size == 6
    through = refused(ws.lstat, "linkdir/x")
    assert through.code == ErrorCode.SYMLINK_REFUSED
    assert through.message == "'linkdir' is a symbolic link"  # O_DIRECTORY|O_NOFOLLOW on a link: ENOTDIR, then judged
    file_as_dir = refused(ws.lstat, "app.py/x")
    assert file_as_dir.code == ErrorCode.NOT_REGULAR_FILE and file_as_dir.message == "'app.py' is not a directory"


def test_directory_walks_no_follow_and_creates_only_when_asked(tree, tmp_path):
    root, _ = tree
    ws = Workspace(root)
    with ws.directory(ws.locate(".")) as fd:
        assert os.fstat(fd).st_ino == os.stat(root).st_ino
    with ws.directory(ws.locate("pkg")) as fd:
        assert os.fstat(fd).st_ino == os.stat(root / "pkg").st_ino
    missing = refused(lambda: ws.directory(ws.locate("a/b")).__enter__())
    assert missing.code == ErrorCode.NOT_FOUND and missing.message == "'a' does not exist"
    assert not (root / "a").exists()
    old_umask = os.umask(0)  # so the mode asked for is the mode given
    try:
        with ws.directory(ws.locate("a/b"), create=True) as fd:
            assert os.fstat(fd).st_ino == os.stat(root / "a" / "b").st_ino
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(root / "a").st_mode) == 0o755 and stat.S_IMODE(os.stat(root / "a" / "b").st_mode) == 0o755
    locked = Workspace(root, protected=("gen",))
    blocked = refused(lambda: locked.directory(locked.locate("gen/x"), create=True).__enter__())
    assert blocked.code == ErrorCode.PROTECTED_PATH and not (root / "gen").exists()
    os.symlink(tmp_path, root / "out")
    linked = refused(lambda: ws.directory(ws.locate("out/new"), create=True).__enter__())
    assert linked.code == ErrorCode.SYMLINK_REFUSED and linked.message == "'out' is a symbolic link"
    assert not (tmp_path / "new").exists()
    leaf = refused(lambda: ws.directory(ws.locate("out")).__enter__())
    assert leaf.code == ErrorCode.SYMLINK_REFUSED


def test_a_file_descriptor_count_stays_flat_across_walks(tree):
    root, _ = tree
    ws = Workspace(root)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        ws.read_text("pkg/mod.py")
        ws.lstat("pkg/mod.py")
        with pytest.raises(ToolFailure):
            ws.read_text("pkg/missing.py")
        with pytest.raises(ToolFailure):
            ws.read_text("app.py/x")
    assert len(os.listdir("/proc/self/fd")) == before


def test_the_read_limit_is_inclusive_and_named(tree):
    root, _ = tree
    ws = Workspace(root)
    (root / "ten.txt").write_bytes(b"0123456789")
    assert ws.read_bytes("ten.txt", max_bytes=10)[0] == b"0123456789"
    over = refused(ws.read_bytes, "ten.txt", max_bytes=9)
    assert over.code == ErrorCode.TOO_LARGE and over.message == "'ten.txt' is 10 bytes (limit 9)"
    shown = refused(ws.read_bytes, ws.locate("ten.txt"), max_bytes=9)
    assert shown.message == "'ten.txt' is 10 bytes (limit 9)"
    big = b"x" * (3 << 20)
    (root / "big.bin").write_bytes(big)
    data, st = ws.read_bytes("big.bin")
    assert data == big and st.st_size == len(big)  # read in several chunks, all of it
    assert ws.read_bytes("big.bin", max_bytes=len(big))[0] == big


def test_a_file_growing_past_the_limit_while_read_is_refused(tree, monkeypatch):
    root, _ = tree
    ws = Workspace(root)
    (root / "grows.txt").write_bytes(b"12345")
    real_fstat = os.fstat

    def fstat_then_grow(fd):
        st = real_fstat(fd)
        with open(root / "grows.txt", "ab") as handle:
            handle.write(b"678")
        return st

    monkeypatch.setattr(os, "fstat", fstat_then_grow)
    grew = refused(ws.read_bytes, "grows.txt", max_bytes=6)
    assert grew.code == ErrorCode.TOO_LARGE and grew.message == "file grew past the read limit while reading"


def test_text_that_is_not_utf8_is_named(tree):
    root, _ = tree
    ws = Workspace(root)
    (root / "bin.dat").write_bytes(b"\xff\xfe")
    for path in ("bin.dat", ws.locate("bin.dat")):
        failure = refused(ws.read_text, path)
        assert failure.code == ErrorCode.INVALID_ARGUMENT and failure.message == "'bin.dat' is not UTF-8 text"
    root_read = refused(ws.read_text, ".")
    assert root_read.code == ErrorCode.NOT_REGULAR_FILE and root_read.message == "the workspace root is a directory"


def test_open_regular_at_names_each_refusal(tree, tmp_path):
    root, _ = tree
    os.symlink(root / "app.py", root / "link.py")
    os.symlink(root / "pkg", root / "dirlink")
    os.symlink(root / "nothing", root / "dangling")
    os.mkfifo(root / "pipe")
    os.symlink(root / "pipe", root / "pipelink")
    fd = os.open(root, DIR_FLAGS)
    try:
        cases = {
            "missing.py": (ErrorCode.NOT_FOUND, "'missing.py' does not exist"),
            "link.py": (ErrorCode.SYMLINK_REFUSED, "'link.py' is a symbolic link; links are never followed"),
            "pipe": (ErrorCode.NOT_REGULAR_FILE, "'pipe' is not a regular file (FIFO, device or socket)"),
            "pkg": (ErrorCode.NOT_REGULAR_FILE, "'pkg' is a directory"),
            **{link: (ErrorCode.SYMLINK_REFUSED, f"{link!r} is a symbolic link; links are never followed")
               for link in ("dirlink", "dangling", "pipelink")},  # judged as links, whatever they lead to
        }
        for name, (code, words) in cases.items():
            failure = refused(open_regular_at, fd, name)
            assert (failure.code, failure.message) == (code, words)
        shown = refused(open_regular_at, fd, "missing.py", "shown/as.py")
        assert shown.message == "'shown/as.py' does not exist"
        opened, st = open_regular_at(fd, "app.py")
        try:
            assert Identity.of(st) == Identity.of(os.stat(root / "app.py"))
            assert os.read(opened, 100) == b"print('inside')\n"
        finally:
            os.close(opened)
    finally:
        os.close(fd)


def test_a_file_replaced_between_its_lstat_and_its_open_is_stale(tree, monkeypatch):
    root, _ = tree
    real_open = os.open

    def replace_then_open(path, flags, *args, **kwargs):
        if path == "app.py":
            os.replace(root / "pkg" / "mod.py", root / "app.py")  # another regular file, another inode
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", replace_then_open)
    failure = refused(Workspace(root).read_text, "app.py")
    assert failure.code == ErrorCode.STALE_INPUT and failure.message == "'app.py' was replaced while opening it"


def test_a_walk_step_that_fails_otherwise_is_an_execution_failure_named_for_the_path(tree, monkeypatch):
    root, _ = tree
    real_open = os.open

    def denied(path, flags, *args, **kwargs):
        if path == "pkg":
            raise OSError(errno.EACCES, os.strerror(errno.EACCES))  # fault injection: what a denied folder answers
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    failure = refused(Workspace(root).read_text, "pkg/mod.py")
    assert failure.code == ErrorCode.EXECUTION_FAILED and failure.message == "'pkg': Permission denied"


def test_identity_is_device_inode_size_and_mtime(tree):
    root, _ = tree
    st = os.stat(root / "app.py")
    assert Identity.of(st) == Identity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    before = Identity.of(st)
    os.utime(root / "app.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert Identity.of(os.stat(root / "app.py")) != before  # same bytes, same inode, a new mtime


def test_read_text_keeps_its_limit(tree):
    root, _ = tree
    ws = Workspace(root)
    assert ws.read_text("app.py", max_bytes=16) == "print('inside')\n"
    failure = refused(ws.read_text, "app.py", max_bytes=15)
    assert failure.code == ErrorCode.TOO_LARGE and failure.message == "'app.py' is 16 bytes (limit 15)"


def test_a_link_swapped_in_after_the_lstat_is_named_as_a_link(tree, tmp_path, monkeypatch):
    root, _ = tree
    real_open = os.open

    def swap_then_open(path, flags, *args, **kwargs):
        if path == "app.py":
            os.replace(root / "app.py", root / "app.py.bak")
            os.symlink(tmp_path, root / "app.py")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap_then_open)
    failure = refused(Workspace(root).read_text, "app.py")
    assert failure.code == ErrorCode.SYMLINK_REFUSED
    assert failure.message == "'app.py' is a symbolic link; links are never followed"


def test_a_component_that_vanishes_right_after_refusing_to_open_as_a_folder_is_not_called_a_link(tree, monkeypatch):
    root, _ = tree
    real_open = os.open

    def open_then_vanish(path, flags, *args, **kwargs):
        try:
            return real_open(path, flags, *args, **kwargs)
        except NotADirectoryError:
            if path == "app.py":
                os.unlink(root / "app.py")  # gone before the fence looks at what it was
            raise

    monkeypatch.setattr(os, "open", open_then_vanish)
    failure = refused(Workspace(root).read_text, "app.py/x")
    assert failure.code == ErrorCode.NOT_REGULAR_FILE and failure.message == "'app.py' is not a directory"


def test_a_fifo_swapped_in_after_the_lstat_is_refused_without_waiting(tree, monkeypatch):
    root, _ = tree
    real_open = os.open

    def swap_then_open(path, flags, *args, **kwargs):
        if path == "app.py":
            os.replace(root / "app.py", root / "app.py.bak")
            os.mkfifo(root / "app.py")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap_then_open)
    failure = refused(Workspace(root).read_text, "app.py")
    assert failure.code == ErrorCode.NOT_REGULAR_FILE
    assert failure.message == "'app.py' is not a regular file (FIFO, device or socket)"


@pytest.mark.parametrize("grown", [1, 5 << 20])
def test_a_file_growing_while_read_is_read_at_most_one_byte_past_the_limit(tree, monkeypatch, grown):
    """Bounded memory: a file that grows after its size was checked is never read to its end."""
    root, _ = tree
    limit = 2 << 20
    (root / "grows.bin").write_bytes(b"x" * limit)
    real_fstat, real_read = os.fstat, os.read
    read = []

    def fstat_then_grow(fd):
        st = real_fstat(fd)
        with open(root / "grows.bin", "ab") as handle:
            handle.write(b"y" * grown)
        return st

    def counting_read(fd, n):
        chunk = real_read(fd, n)
        read.append(len(chunk))
        return chunk

    monkeypatch.setattr(os, "fstat", fstat_then_grow)
    monkeypatch.setattr(os, "read", counting_read)
    failure = refused(Workspace(root).read_bytes, "grows.bin", max_bytes=limit)
    monkeypatch.undo()
    assert failure.code == ErrorCode.TOO_LARGE and failure.message == "file grew past the read limit while reading"
    assert sum(read) == limit + 1


def test_an_absolute_path_climbing_above_slash_is_named_with_its_text(tree):
    failure = refused(Workspace(tree[0]).locate, "/../etc/passwd")
    assert failure.code == ErrorCode.OUTSIDE_WORKSPACE and failure.message == "'/../etc/passwd' escapes the workspace"
