# ruff: noqa: F811 - fixtures imported from jupyter_fixtures / shell_tools_fixtures are requested by name
"""A tree that claims more than it holds cannot inflate disk or CPU outside the workspace.

The class (red-team finding, MEDIUM): a sandboxed command makes a tiny tree look enormous with
sparse files (``truncate -s``) and hard links (``ln``), or with a flood of empty names; every
host-side operation that goes name by name over that tree would turn the claim into real bytes
in host state or hours of server CPU. Operations: ``sh_checkpoint`` (tool through the real
Executor and the Python API, the plant made by a real bubblewrap sandbox), Phase 3's snapshots
and digests (``snapshots.take``/``tree_digest``, ``run_phase3``), the generation ledger
(``tree_hashes``, read when a run finishes), and the run archive over REST
(``GET runs/{id}/archive`` of a real jupyter_server). Budgets are set low through the
operator's environment variables (``BESSER_<KIND>_MAX_BYTES``/``_MAX_FILES``) so plants stay small.

Every case asserts the named refusal or skip (``tree_too_large``, a Phase 3 warning finding,
archive notes), that the real bytes written outside the workspace (``st_blocks * 512``) stay
under the budget, that the workspace is unchanged, and that nothing hangs (``no_hang``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from file_tool_helpers import tree_state
from jupyter_fixtures import (  # noqa: F401
    auth,
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    poll,
    runs_dir,
)
from shell_tools_fixtures import h, needs_bwrap  # noqa: F401 - h is a fixture

from kernel_ext.errors import ToolFailure
from kernel_ext.generation.manifest import tree_hashes
from kernel_ext.pipeline import snapshots
from kernel_ext.pipeline.phase3 import RoundOutcome, run_phase3
from kernel_ext.server.archive import NOTES_NAME, OVER_BUDGET
from kernel_ext.findings import Finding, ValidationReport
from kernel_ext.workspace import treewalk
from kernel_ext.workspace.treebudget import HASHED_BY_METADATA, TreeBudget, TreeLimits
from kernel_ext.workspace.treecopy import clone_file

from .test_sec_tree_links import fetch_archive, no_hang, waiting_run

MIB = 1024 * 1024
BUDGET = 1 * MIB
MAX_FILES = 100

# Plants a sandboxed command can make (run with sh in the folder that is copied).
PLANTS = {
    # the red team's shape: one sparse file, many names (each name fits, all 11 x 200 KiB do not; ~0 on disk)
    "sparse-hardlinks": "truncate -s 200K big && for i in $(seq 1 10); do ln big h$i; done",
    # one sparse file alone past the budget
    "sparse": "printf head > big && truncate -s 8M big",
    # a flood of empty names past the entry cap
    "many-names": "mkdir d && for i in $(seq 1 150); do : > d/f$i; done",
}


def real_bytes(root: Path) -> int:
    """What ``root`` really occupies on disk (never follows a link)."""
    if not root.exists():
        return 0
    total = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


def plant_here(folder: Path, plant: str) -> None:
    """The same plant, made by the host (for the snapshot and archive cases)."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["sh", "-c", PLANTS[plant]], cwd=folder, check=True)


@pytest.fixture
def low_budgets(monkeypatch):
    for kind in ("CHECKPOINT", "SNAPSHOT", "ARCHIVE"):
        monkeypatch.setenv(f"BESSER_{kind}_MAX_BYTES", str(BUDGET))
        monkeypatch.setenv(f"BESSER_{kind}_MAX_FILES", str(MAX_FILES))


# -- sh_checkpoint: real tools, real bubblewrap ---------------------------------------------------


def checkpoint_code(h, entry: str, **arguments) -> tuple[str | None, str]:
    if entry == "tool":
        result = h.call("sh_checkpoint", **arguments)
        return (None, "") if result.ok else (result.error.code, result.error.message)
    try:
        h.shell.checkpoint(**arguments)
    except ToolFailure as exc:
        return str(exc.code), exc.message
    return None, ""


@needs_bwrap
@pytest.mark.parametrize("entry", ["tool", "python"])
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_checkpoint_of_an_inflated_tree_is_refused_and_writes_nothing(h, low_budgets, plant, entry):
    (h.ws / "a").mkdir()
    (h.ws / "a" / "keep.txt").write_text("kept\n")
    planted = h.call("sh_run", command=f"cd a && {PLANTS[plant]}")  # from inside the sandbox
    assert planted.ok, planted.observation
    before = tree_state(h.ws)
    code, message = no_hang(checkpoint_code, h, entry, label="x", dir="a")
    assert code == "tree_too_large", message
    variable = "BESSER_CHECKPOINT_MAX_FILES" if plant == "many-names" else "BESSER_CHECKPOINT_MAX_BYTES"
    assert "'x'" in message and "refused" in message and variable in message
    assert real_bytes(h.state / "checkpoints") <= BUDGET  # nothing kept: the partial copy is removed
    assert not [p for p in (h.state / "checkpoints").rglob("*") if p.is_file()]
    assert h.call("sh_restore", label="x").error.code == "unknown_checkpoint"
    assert tree_state(h.ws) == before


@needs_bwrap
def test_many_labels_cannot_fill_the_store_beyond_its_budget(h, monkeypatch):
    """Each label is within its own budget; together they are held to the project's store budget."""
    monkeypatch.setenv("BESSER_CHECKPOINT_MAX_BYTES", str(64 * MIB))
    monkeypatch.setenv("BESSER_CHECKPOINT_STORE_MAX_BYTES", str(40 * MIB))
    (h.ws / "a").mkdir()
    assert h.call("sh_run", command="cd a && truncate -s 16M big").ok  # 16 MiB claimed, nothing written
    before = tree_state(h.ws)
    taken = [no_hang(h.call, "sh_checkpoint", label=f"c{i}", dir="a") for i in range(3)]
    assert [t.ok for t in taken] == [True, True, False], [t.observation for t in taken]
    refused = taken[2].error
    assert refused.code == "tree_too_large" and "'c2'" in refused.message and "BESSER_CHECKPOINT_STORE_MAX_BYTES" in refused.message
    assert sorted(m["label"] for m in h.shell.checkpoint_store.list()) == ["c0", "c1"]
    assert not [p for p in (h.state / "checkpoints").rglob(".gen-c2-*")]  # nothing of the refused one kept
    assert no_hang(h.call, "sh_checkpoint", label="c1", dir="a").ok  # replacing a label does not count twice
    assert tree_state(h.ws) == before


@needs_bwrap
def test_the_store_counts_every_entry_of_its_checkpoints(h, monkeypatch):
    """Folders and links count toward the store's entries as they do toward one checkpoint's."""
    monkeypatch.setenv("BESSER_CHECKPOINT_STORE_MAX_FILES", "30")
    (h.ws / "a").mkdir()
    assert h.call("sh_run", command="cd a && mkdir -p d1 d2 d3 d4 d5 d6 d7 d8 && : > f && ln -s f l").ok  # 10 entries, 1 file
    taken = [no_hang(h.call, "sh_checkpoint", label=f"c{i}", dir="a") for i in range(4)]
    assert [t.ok for t in taken] == [True, True, True, False], [t.observation for t in taken]
    assert taken[3].error.code == "tree_too_large"


@needs_bwrap
def test_checkpoint_within_budget_keeps_holes_and_copies_a_hard_link_once(h, monkeypatch):
    monkeypatch.setenv("BESSER_CHECKPOINT_MAX_BYTES", str(64 * MIB))
    (h.ws / "a").mkdir()
    assert h.call("sh_run", command="cd a && printf head > big && truncate -s 8M big && ln big h1 && ln big h2").ok
    before = tree_state(h.ws)
    taken = no_hang(h.call, "sh_checkpoint", label="x", dir="a")
    assert taken.ok and taken.data["files"] == 3 and taken.data["bytes"] == 3 * 8 * MIB, taken.observation
    assert real_bytes(h.state / "checkpoints") < MIB  # 24 MiB claimed, the holes stayed holes
    tree = next((h.state / "checkpoints").rglob("tree"))
    assert len({(tree / n).stat().st_ino for n in ("big", "h1", "h2")}) == 1  # one copy, three names
    assert h.call("sh_run", command="rm a/h1 && echo changed > a/big").ok
    assert no_hang(h.call, "sh_restore", label="x").ok
    assert tree_state(h.ws) == before


# -- Phase 3: snapshots and digests ----------------------------------------------------------------


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_snapshot_past_its_budget_is_refused_and_keeps_nothing(tmp_path, low_budgets, plant):
    app = tmp_path / "app"
    (app / "main.py").parent.mkdir(parents=True)
    (app / "main.py").write_text("print('app')\n")
    plant_here(app, plant)
    before = tree_state(app)
    with pytest.raises(ToolFailure) as refused:
        no_hang(snapshots.take, app, tmp_path / "snaps", "s1")
    assert refused.value.code == "tree_too_large" and "BESSER_SNAPSHOT_MAX_" in refused.value.message
    assert not (tmp_path / "snaps" / "s1").exists() and real_bytes(tmp_path / "snaps") == 0
    assert tree_state(app) == before


def test_snapshot_within_budget_keeps_holes_and_links(tmp_path):
    app = tmp_path / "app"
    plant_here(app, "sparse-hardlinks")
    limits = TreeLimits("snapshot", 64 * MIB, MAX_FILES)
    taken = no_hang(snapshots.take, app, tmp_path / "snaps", "s1", limits)
    assert real_bytes(taken.path) < MIB and len({(taken.path / f"h{i}").stat().st_ino for i in range(1, 11)}) == 1
    assert taken.digest == snapshots.tree_digest(app, limits=limits)


def test_digest_past_its_budget_hashes_by_size_and_time_and_still_sees_changes(tmp_path, low_budgets):
    app = tmp_path / "app"
    plant_here(app, "sparse-hardlinks")
    notes = treewalk.Notes()
    first = no_hang(snapshots.tree_digest, app, notes)
    assert notes[HASHED_BY_METADATA] == 6  # 5 names x 200 KiB fit in 1 MiB; never read past it
    assert no_hang(snapshots.tree_digest, app) == first
    os.truncate(app / "big", 3 * MIB)
    assert no_hang(snapshots.tree_digest, app) != first


def test_generation_ledger_hashes_within_the_budget(tmp_path, low_budgets):
    app = tmp_path / "app"
    plant_here(app, "sparse-hardlinks")
    notes = treewalk.Notes()
    hashes = no_hang(tree_hashes, app, notes=notes)
    assert len(hashes) == 11 and notes[HASHED_BY_METADATA] == 6
    assert sum(v.startswith("meta:") for v in hashes.values()) == 6


def test_phase3_goes_on_without_a_snapshot_past_the_budget_and_rolls_back_to_the_last_one(tmp_path, low_budgets):
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.py").write_text("print('app')\n")
    start = tree_state(app)
    blockers = [2, 1, 3]  # the start, round 1 (better, but inflated), round 2 on (worse than the start)
    events: list[tuple[str, dict]] = []

    async def validate():
        count = blockers.pop(0) if len(blockers) > 1 else blockers[0]
        return ValidationReport(tuple(Finding("blocker", "test", f"broken {i}") for i in range(count)))

    async def repair(report, round_no):
        if round_no == 1:
            plant_here(app, "sparse-hardlinks")  # a repair round inflates the tree
        return RoundOutcome()

    def main():
        return asyncio.run(run_phase3(app, tmp_path / "snaps", validate, repair, turns_left=2,
                                      emit=lambda kind, **data: events.append((kind, data))))

    result = no_hang(main)
    refused = [d for k, d in events if k == "finding" and d["source"] == "phase3-snapshot"]
    assert len(refused) == 1 and "tree_too_large" in refused[0]["message"] and "phase3-round-1" in refused[0]["message"]
    assert [d["snapshot_id"] for k, d in events if k == "snapshot"] == ["phase3-start", "phase3-start"]  # taken, restored
    assert result.rolled_back and len(result.report.blockers) == 2
    assert tree_state(app) == start  # back to the last snapshot that could be taken
    assert real_bytes(tmp_path / "snaps") < MIB


# -- the archive over REST ------------------------------------------------------------------------


@pytest.mark.parametrize("plant", sorted(PLANTS))
async def test_archive_leaves_out_what_is_past_its_budget(jp_fetch, jp_serverapp, runs_dir, low_budgets, plant):
    run = await waiting_run(jp_fetch, jp_serverapp)
    app = runs_dir / run.id / "app"
    (app / "small.txt").write_text("small\n")
    os.link(app / "small.txt", app / "small-link.txt")  # a hard link within budget is kept
    plant_here(app / "z", plant)  # after the generated files in walk order
    before = tree_state(app)
    try:
        archive = await fetch_archive(jp_fetch, run.id, app)
        names = archive.namelist()
        assert {f"{run.id}/app/calculator.py", f"{run.id}/app/small.txt", f"{run.id}/app/small-link.txt"} <= set(names)
        assert sum(info.file_size for info in archive.infolist()) <= BUDGET + 64 * 1024  # + the notes entry
        assert len(names) <= MAX_FILES + 1
        notes = archive.read(f"{run.id}/{NOTES_NAME}").decode()
        assert OVER_BUDGET in notes
        if plant != "many-names":
            assert "'app/z/" in notes and "(left out: claims" in notes  # named, one by one
            assert plant != "sparse" or f"{run.id}/app/z/big" not in names
            assert f"{run.id}/events.jsonl" in names  # the run's record still makes it in
        assert tree_state(app) == before
    finally:
        await jp_fetch("besser-agent", "runs", run.id, "cancel", method="POST", body="{}")


# -- the shared pieces -------------------------------------------------------------------------------


def test_a_copy_never_reads_past_the_size_it_was_charged_and_keeps_holes(tmp_path):
    src = tmp_path / "src"
    with open(src, "wb") as f:
        f.write(b"0123456789")
        f.seek(8 * MIB)
        f.write(b"tail")
    fd = os.open(src, os.O_RDONLY)
    try:
        for size, expected in ((4, b"0123"), (8 * MIB + 4, None)):
            out_path = tmp_path / f"out-{size}"
            out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                clone_file(fd, out, size)
            finally:
                os.close(out)
            assert out_path.read_bytes() == (expected if expected is not None else src.read_bytes())
            assert os.lstat(out_path).st_blocks * 512 < MIB  # the 8 MiB hole stayed a hole
    finally:
        os.close(fd)


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, (512 * MIB, 50_000)),
    ({"BESSER_ARCHIVE_MAX_BYTES": "1_000", "BESSER_ARCHIVE_MAX_FILES": "7"}, (1000, 7)),
    ({"BESSER_ARCHIVE_MAX_BYTES": "lots"}, (512 * MIB, 50_000)),  # malformed: the safe default, never unlimited
    ({"BESSER_ARCHIVE_MAX_BYTES": "0"}, (0, 50_000)),  # 0: the operator lifts the limit on purpose
])
def test_limits_are_operator_settings(environ, expected):
    limits = TreeLimits.for_kind("archive", environ)
    assert (limits.max_bytes, limits.max_files) == expected


def test_a_budget_counts_every_name_of_a_hard_link(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 600)
    os.link(tmp_path / "f", tmp_path / "g")
    budget = TreeBudget(TreeLimits("archive", 1000, 10))
    budget.charge(os.stat(tmp_path / "f"))
    with pytest.raises(ToolFailure) as refused:
        budget.charge(os.stat(tmp_path / "g"))
    assert refused.value.code == "tree_too_large" and "BESSER_ARCHIVE_MAX_BYTES" in refused.value.message
