"""The descriptor walk's own rules on real folders (``workspace/treewalk``): the depth bound, the skip
set and prefix carried down, a hashed prefix of exactly ``limit`` bytes, the words of the notes."""

from __future__ import annotations

import hashlib
import os

from kernel_ext.generation.manifest import tree_hashes
from kernel_ext.pipeline.snapshots import tree_digest
from kernel_ext.workspace import treewalk


def test_the_walk_stops_at_max_depth_and_carries_skip_and_prefix_down(tmp_path):
    deep = tmp_path
    for _ in range(treewalk.MAX_DEPTH + 2):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (tmp_path / "d" / "skipme").mkdir()
    (tmp_path / "d" / "skipme" / "x.txt").write_text("x")
    with treewalk.opened_dir(tmp_path) as fd:
        found = [rel for rel, _ in treewalk.walk(fd, frozenset({"skipme"}), "top/")]
        depths = [rel.count("/") for rel in found]
        assert max(depths) == treewalk.MAX_DEPTH  # "top/" plus 64 levels of d: the 65th is never listed
        assert all(rel.startswith("top/d") for rel in found) and not [r for r in found if "skipme" in r]
        shallow = [rel for rel, _ in treewalk.walk(fd, frozenset({"skipme"}), depth=treewalk.MAX_DEPTH - 2)]
        assert shallow == ["d", "d/d"]  # the depth given is where the walk starts counting


def test_regular_files_carry_the_skip_set_and_count_without_a_notes_counter(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "skipme").mkdir()
    (tmp_path / "a" / "skipme" / "no.txt").write_text("no")
    (tmp_path / "a" / "yes.txt").write_text("yes")
    os.symlink("/etc/passwd", tmp_path / "a" / "link")
    with treewalk.opened_dir(tmp_path) as fd:
        assert [rel for rel, _fd, _st in treewalk.regular_files(fd, frozenset({"skipme"}))] == ["a/yes.txt"]


def test_a_hash_with_a_limit_reads_exactly_that_many_bytes(tmp_path):
    data = os.urandom(3 * treewalk.CHUNK // 2)
    (tmp_path / "f").write_bytes(data)
    for limit in (0, 1, 2, treewalk.CHUNK + 5, len(data), len(data) + 10, None):
        fd = os.open(tmp_path / "f", os.O_RDONLY)
        try:
            expected = data if limit is None else data[:limit]
            assert treewalk.sha256_fd(fd, limit) == hashlib.sha256(expected).hexdigest(), limit
        finally:
            os.close(fd)
        fd = os.open(tmp_path / "f", os.O_RDONLY)
        try:
            assert b"".join(treewalk.read_chunks(fd, limit)) == (data if limit is None else data[:limit])
        finally:
            os.close(fd)


def test_the_notes_in_words():
    notes = treewalk.Notes({treewalk.SKIPPED_LINK: 2, treewalk.SKIPPED_SPECIAL: 1, treewalk.SKIPPED_RACED: 0})
    assert treewalk.describe(notes) == f"1 {treewalk.SKIPPED_SPECIAL}; 2 {treewalk.SKIPPED_LINK}"


def test_the_ledger_and_the_digest_see_a_file_at_the_deepest_listed_level(tmp_path):
    """Through their own entry points (the walk's default depth): a file under ``MAX_DEPTH - 1`` folders
    is hashed and changes the digest; one folder deeper is never listed."""
    deepest = tmp_path.joinpath(*["d"] * (treewalk.MAX_DEPTH - 1))
    (deepest / "d").mkdir(parents=True)
    (deepest / "f.txt").write_text("one")
    (deepest / "d" / "g.txt").write_text("never listed")
    rel = "d/" * (treewalk.MAX_DEPTH - 1) + "f.txt"
    assert list(tree_hashes(tmp_path)) == [rel]
    before = tree_digest(tmp_path)
    (deepest / "f.txt").write_text("two")
    assert tree_digest(tmp_path) != before
    unchanged = tree_digest(tmp_path)
    (deepest / "d" / "g.txt").write_text("changed, still never listed")
    assert tree_digest(tmp_path) == unchanged
