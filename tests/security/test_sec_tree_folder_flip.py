# ruff: noqa: F811 - fixtures imported from jupyter_fixtures / shell_tools_fixtures are requested by name
"""Tree walks never follow a folder link: a FOLDER swapped for a link to a host folder between the
listing and its open is never entered, by every tree operation (the archive over REST, a Phase 3
snapshot, a checkpoint through the real tool, a digest, the generation manifest).

The audit's survivor: dropping ``O_NOFOLLOW`` from the walk's folder open (``treewalk.open_dir``)
survived, since the flip-after-listing tests only flipped files. The swap is made deterministic
with the same hook (``flip_after_listing``: right after the walk lists the parent folder).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from file_tool_helpers import tree_state
from jupyter_fixtures import auth, extension_config, jp_asyncio_loop, jp_server_config, poll, runs_dir  # noqa: F401
from shell_tools_fixtures import h, needs_bwrap  # noqa: F401 - h is a fixture

from kernel_ext.generation.manifest import tree_hashes
from kernel_ext.pipeline import snapshots
from kernel_ext.workspace import treewalk

from .test_sec_tree_links import SECRET, fetch_archive, host_folder, no_hang, waiting_run


def folder_to_flip(root: Path) -> None:
    """``root/sub/`` with one innocent file; the flip turns ``sub`` into a link to the host folder."""
    (root / "sub").mkdir(parents=True, exist_ok=True)
    (root / "sub" / "inner.txt").write_text("innocent\n")


def flip_folder_after_listing(monkeypatch, outside: Path) -> list[str]:
    """The files' hook (``flip_after_listing``: wrap ``treewalk.entries``), for a folder: right
    after the walk lists the folder holding ``sub``, ``sub`` becomes a link to the host folder."""
    real = treewalk.entries
    flipped: list[str] = []

    def entries(fd, skip=frozenset()):
        found = real(fd, skip)
        if "sub" in dict(found) and not flipped:
            path = os.path.join(os.readlink(f"/proc/self/fd/{fd}"), "sub")
            shutil.rmtree(path)
            os.symlink(outside, path)
            flipped.append(path)
        return found

    monkeypatch.setattr(treewalk, "entries", entries)
    return flipped


def holds_no_host_byte(tree: Path) -> bool:
    return not any(SECRET.encode() in p.read_bytes() or b"host data" in p.read_bytes()
                   for p in tree.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture
def flip(monkeypatch, tmp_path):
    """Arms the swap of ``sub`` for a link to the host folder; returns (host folder, flipped list)."""
    outside = host_folder(tmp_path)
    return outside, flip_folder_after_listing(monkeypatch, outside)


def test_a_snapshot_never_enters_a_folder_swapped_for_a_link(tmp_path, flip):
    outside, flipped = flip
    app = tmp_path / "app"
    folder_to_flip(app)
    before = tree_state(outside)
    taken = no_hang(snapshots.take, app, tmp_path / "snaps", "s1", release=app)
    assert flipped and holds_no_host_byte(taken.path)
    assert not (taken.path / "sub" / "secret.txt").exists() and not (taken.path / "sub" / "keep").exists()
    assert tree_state(outside) == before


def test_a_digest_never_enters_a_folder_swapped_for_a_link(tmp_path, flip):
    outside, flipped = flip
    app = tmp_path / "app"
    app.mkdir()
    digests = []
    for content in (SECRET, "changed on the host"):  # a followed link would hash the host's file
        (outside / "secret.txt").write_text(content + "\n")
        if (app / "sub").is_symlink():
            (app / "sub").unlink()
        folder_to_flip(app)
        flipped.clear()
        digests.append(no_hang(snapshots.tree_digest, app, release=app))
        assert flipped
    assert digests[0] == digests[1]


def test_the_manifest_never_hashes_a_folder_swapped_for_a_link(tmp_path, flip):
    outside, flipped = flip
    app = tmp_path / "app"
    folder_to_flip(app)
    (app / "main.py").write_text("print('app')\n")
    (app / "zzz").mkdir()
    (app / "zzz" / "after.py").write_text("X = 1\n")  # listed after the flipped folder: still walked
    before = tree_state(outside)
    hashes = no_hang(tree_hashes, app, release=app)
    assert flipped and sorted(hashes) == ["main.py", "zzz/after.py"]
    assert tree_state(outside) == before


@needs_bwrap
def test_a_checkpoint_never_copies_a_folder_swapped_for_a_link(h, flip):
    outside, flipped = flip
    folder_to_flip(h.ws / "a")
    before = tree_state(outside)
    taken = no_hang(h.call, "sh_checkpoint", release=h.ws, label="x")
    assert flipped, "the walk never listed the folder"
    assert holds_no_host_byte(h.state), taken.observation
    assert tree_state(outside) == before


async def test_the_archive_never_enters_a_folder_swapped_for_a_link(jp_fetch, jp_serverapp, runs_dir, flip):
    outside, flipped = flip
    run = await waiting_run(jp_fetch, jp_serverapp)
    app = runs_dir / run.id / "app"
    folder_to_flip(app)
    before = tree_state(outside)
    try:
        archive = await fetch_archive(jp_fetch, run.id, app)
        names = archive.namelist()
        assert flipped and f"{run.id}/app/calculator.py" in names
        assert not [n for n in names if "/app/sub/" in n], names
        assert not any(SECRET.encode() in archive.read(n) or b"host data" in archive.read(n) for n in names)
        assert tree_state(outside) == before
    finally:
        await jp_fetch("besser-agent", "runs", run.id, "cancel", method="POST", body="{}")
