"""The read store's bookkeeping, where mutation testing found it unguarded: what counts as seen whole, ids, eviction.

Whole-file knowledge is what lets ``write_file`` replace an existing file; each case below goes
through the real tools (``read_file`` then ``write_file``) over a real folder. The id and
eviction cases use the store itself: nothing else can reach 257 views in one test cheaply.
"""

from __future__ import annotations

import re

import pytest
from file_tool_helpers import Harness

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.tools.files_read import LINE_MAX_CHARS
from kernel_ext.tools.read_ids import MAX_VIEWS, ReadStore
from kernel_ext.workspace import Workspace
from kernel_ext.workspace.locks import lock_key

LONG = "x = '" + "z" * (LINE_MAX_CHARS + 10) + "'"


def rewrite(h: Harness, path: str = "f.py"):
    return h.call("write_file", path=path, content="y = 2\n")


def reads(h: Harness, path: str, *windows: tuple[int, int]) -> None:
    for offset, limit in windows:
        result = h.call("read_file", path=path, offset=offset, limit=limit)
        assert result.ok, result.observation


@pytest.mark.parametrize(
    ("text", "windows", "whole"),
    [
        ("a = 1\n", [(0, 1)], True),  # a one-line file shown in full
        ("", [(0, 1)], True),  # an empty file: nothing to miss
        ("a = 1\nb = 2\nc = 3\n", [(0, 2), (2, 1)], True),  # the last window is one line
        ("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n", [(0, 2), (3, 2)], False),  # line 3 was never shown
        ("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n", [(0, 2), (3, 2), (2, 1)], True),  # ... until it is
        (LONG + "\n", [(0, 1)], False),  # one line, cut
        ("a = 1\n" + LONG + "\nc = 3\n", [(0, 3)], False),  # a cut line in the middle
        (LONG + "\n" + LONG + "\nc = 3\n", [(0, 3)], False),  # consecutive cut lines
        ("a = 1\n" + LONG + "\n", [(0, 2)], False),  # a cut last line
    ],
    ids=["one-line", "empty", "one-line-last-window", "gap", "gap-filled", "cut-only", "cut-middle",
         "cut-twice", "cut-last"],
)
def test_write_file_may_replace_only_a_file_seen_whole(tmp_path, text, windows, whole):
    (tmp_path / "f.py").write_text(text)
    h = Harness(tmp_path)
    reads(h, "f.py", *windows)
    if whole:
        assert rewrite(h).ok
        assert (tmp_path / "f.py").read_text() == "y = 2\n"
    else:
        h.refused(ErrorCode.NOT_READ, "write_file", path="f.py", content="y = 2\n")


def test_a_new_version_starts_its_coverage_afresh(tmp_path):
    (tmp_path / "f.py").write_text("a = 1\nb = 2\nc = 3\n")
    h = Harness(tmp_path)
    reads(h, "f.py", (0, 2))
    (tmp_path / "f.py").write_text("a = 1\nb = 2\nc = 4\n")
    reads(h, "f.py", (2, 1))  # line 3 of the new version; lines 1-2 were seen of the old one only
    h.refused(ErrorCode.NOT_READ, "write_file", path="f.py", content="y = 2\n")
    reads(h, "f.py", (0, 2))
    assert rewrite(h).ok


def test_a_read_id_of_another_file_names_the_file_it_was_issued_for(tmp_path):
    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / "b.py").write_text("b = 1\n")
    h = Harness(tmp_path)
    read_id = h.read("a.py")
    refused = h.refused(ErrorCode.UNKNOWN_READ_ID, "replace_file_lines", path="b.py", read_id=read_id,
                        start_line=1, end_line=1, new_text="b = 2")
    assert "was issued for 'a.py', not 'b.py'" in refused.observation


def test_refusals_tell_the_model_what_to_call():
    store = ReadStore()
    view = store.mint("k", "f.py", "sha", 1, 1, frozenset(), 1)
    store.spend(view.read_id)
    with pytest.raises(ToolFailure) as spent:
        store.view(view.read_id)
    assert spent.value.code == ErrorCode.READ_ID_SPENT
    assert spent.value.message.endswith("Call read_file again and use the new read_id")
    with pytest.raises(ToolFailure) as unknown:
        store.view("r000000-9")
    assert unknown.value.code == ErrorCode.UNKNOWN_READ_ID
    assert unknown.value.message.endswith("Call read_file on the file and use the read_id it returns")


def test_ids_carry_a_fresh_epoch_and_count_from_one():
    store = ReadStore()
    first = store.mint("k", "f.py", "sha", 1, 1, frozenset(), 1).read_id
    assert re.fullmatch(r"r[0-9a-f]{6}-1", first), first
    old_epoch = store.epoch
    store.expire()
    assert re.fullmatch(r"[0-9a-f]{6}", store.epoch) and store.epoch != old_epoch  # 1 in 16.7 million alike
    later = store.mint("k", "f.py", "sha", 1, 1, frozenset(), 1).read_id
    assert later.startswith(f"r{store.epoch}-") and not later.startswith(f"r{old_epoch}-")


def test_the_oldest_views_go_first_and_spent_ones_free_their_slot():
    store = ReadStore()
    ids = [store.mint(f"k{n}", "f.py", "sha", 1, 1, frozenset(), 1).read_id for n in range(MAX_VIEWS + 1)]
    with pytest.raises(ToolFailure):
        store.view(ids[0])  # the oldest was evicted
    assert store.view(ids[1]) and store.view(ids[-1])  # exactly MAX_VIEWS are kept: the next oldest and the newest
    store.spend(ids[0])  # spending an evicted id is harmless
    store.spend(ids[-1])
    store.mint("again", "f.py", "sha", 1, 1, frozenset(), 1)
    assert store.view(ids[1]), "a spent view still held a slot"


def test_a_read_is_remembered_per_file_by_key_or_location(tmp_path):
    (tmp_path / "f.py").write_text("a = 1\n")
    (tmp_path / "g.py").write_text("b = 1\n")
    ws = Workspace(tmp_path)
    here, other = ws.locate("f.py"), ws.locate("g.py")
    store = ReadStore()
    assert not store.was_read(here) and not store.was_read(lock_key(here))
    store.mint(lock_key(here), "f.py", "sha", 1, 1, frozenset(), 1)
    assert store.was_read(here) and store.was_read(lock_key(here))
    assert not store.was_read(other) and not store.was_read("f.py")  # a display path is not a key
