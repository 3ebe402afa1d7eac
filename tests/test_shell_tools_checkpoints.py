# ruff: noqa: F811 - the h fixture imported from shell_tools_fixtures is requested by name
"""Checkpoints: byte-for-byte restore, origin-only restores, labels, project namespaces, links never followed."""

from __future__ import annotations

import os
import stat

import pytest
from shell_tools_fixtures import h, needs_bwrap, tree_of  # noqa: F401 - h is a fixture

from kernel_ext.errors import ToolFailure
from kernel_ext.sandbox.shtools.checkpoints import CheckpointStore

pytestmark = needs_bwrap


def modes(root):
    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in root.rglob("*")}


def populate(ws):
    (ws / "app").mkdir()
    (ws / "app" / "main.py").write_text("print('v1')\n")
    (ws / "app" / "data.bin").write_bytes(bytes(range(256)) * 64)
    (ws / "run.sh").write_text("#!/bin/sh\necho run\n")
    (ws / "run.sh").chmod(0o755)
    (ws / "docs").mkdir()
    (ws / "docs" / "readme.md").write_text("docs\n")
    (ws / "current").symlink_to("app/main.py")
    (ws / "escape").symlink_to("/etc")  # kept as a link, never followed


def test_checkpoint_restored_byte_for_byte(h):
    populate(h.ws)
    before, before_modes = h.tree(), modes(h.ws)
    taken = h.call("sh_checkpoint", label="pre-refactor")
    assert taken.ok and taken.data["files"] == 5 and taken.data["method"] in ("reflink", "copy", "reflink+copy")
    assert h.requests == []  # a 'plan' tool: writes only host state, no approval card
    damage = "rm -rf docs app/data.bin; echo v2 > app/main.py; chmod 600 run.sh; mkdir new; echo x > new/file; ln -sfn run.sh current"
    assert h.call("sh_run", command=damage).ok
    assert h.tree() != before
    restored = h.call("sh_restore", label="pre-refactor")
    assert restored.ok, restored.observation
    assert h.tree() == before and modes(h.ws) == before_modes
    assert restored.data["removed"] >= 1 and restored.data["written"] >= 4
    card = h.requests[-1]
    assert card.name == "sh_restore" and "risk: destructive" in card.proposal and "pre-refactor" in card.proposal
    again = h.call("sh_restore", label="pre-refactor")
    assert again.data["written"] == 0 and again.data["removed"] == 0  # nothing to do: nothing rewritten


def test_restore_into_a_foreign_directory_is_refused_and_changes_nothing(h):
    populate(h.ws)
    assert h.call("sh_checkpoint", label="docs-only", dir="docs").ok
    (h.ws / "docs" / "readme.md").write_text("changed\n")
    before = h.tree()
    for target in ("sub", "."):
        refused = h.call("sh_restore", label="docs-only", dir=target)
        assert refused.error.code == "checkpoint_origin_mismatch", target
    assert h.tree() == before
    assert h.call("sh_restore", label="docs-only", dir="docs").ok
    assert (h.ws / "docs" / "readme.md").read_text() == "docs\n"
    assert h.call("sh_restore", label="docs-only").ok  # default target: the origin


def test_labels_and_dirs_get_named_errors(h):
    before = h.tree()
    for label in ("a/b", "../x", "", ".", "-dash", "x" * 65):
        assert h.call("sh_checkpoint", label=label).error.code == "invalid_label", label
    assert h.call("sh_restore", label="never-taken").error.code == "unknown_checkpoint"
    assert h.call("sh_restore", label="a/b").error.code == "invalid_label"
    assert h.call("sh_checkpoint", label="ok", dir="../..").error.code == "outside_workspace"
    assert h.call("sh_checkpoint", label="ok", dir="project.txt").error.code == "not_found"
    assert h.tree() == before
    assert not (h.state / "checkpoints").exists() or not list((h.state / "checkpoints").rglob("ok"))


def test_projects_are_namespaced_and_listed(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for root, text in ((one, "first"), (two, "second")):
        root.mkdir()
        (root / "f.txt").write_text(text)
    a, b = CheckpointStore(tmp_path / "state", one), CheckpointStore(tmp_path / "state", two)
    a.create("same")
    b.create("same")
    (one / "f.txt").write_text("changed")
    a.restore("same")
    assert (one / "f.txt").read_text() == "first" and (two / "f.txt").read_text() == "second"
    assert [c["label"] for c in a.list()] == ["same"] and a.list()[0]["origin"] == str(one)
    with pytest.raises(ToolFailure) as foreign:
        a.restore("same", two)
    assert foreign.value.code == "checkpoint_origin_mismatch"
    first = a.get("same")["created_at"]
    a.create("same")  # republished atomically under the same label
    assert a.get("same")["created_at"] >= first and len([e for e in os.listdir(a.root) if e.startswith(".gen-")]) == 1


def test_sh_checkpoints_lists_this_project(h):
    assert h.call("sh_checkpoints").observation == "no checkpoints in this project"
    h.call("sh_checkpoint", label="one")
    h.call("sh_checkpoint", label="two", dir="sub")
    listed = h.call("sh_checkpoints").data["checkpoints"]
    assert [(c["label"], c["origin"]) for c in listed] == [("one", "."), ("two", "sub")]


def test_restore_replaces_a_planted_link_without_following_it(h, tmp_path):
    populate(h.ws)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("untouched\n")
    h.call("sh_checkpoint", label="safe")
    os.remove(h.ws / "docs" / "readme.md")
    os.rmdir(h.ws / "docs")
    (h.ws / "docs").symlink_to(outside)  # a command swapped a folder for a link out of the tree
    assert h.call("sh_restore", label="safe").ok
    assert (h.ws / "docs").is_dir() and not (h.ws / "docs").is_symlink()
    assert tree_of(outside) == {"victim.txt": b"untouched\n"}
