# ruff: noqa: F811 - fixtures imported from jupyter_fixtures / shell_tools_fixtures are requested by name
"""Tree operations never follow a link, never open a FIFO or device, never write outside the run.

The class (G0 findings 2, 3, 5): every operation that walks or copies a run's tree, over every
plant a sandboxed command can leave in it. Operations: ``sh_checkpoint`` and ``sh_restore``
(with and without ``dir``) through the real Executor and a real bubblewrap sandbox that makes
the plants itself; the run archive over REST (``GET runs/{id}/archive`` of a real
jupyter_server); Phase 3's snapshots and digests (``snapshots``, ``run_phase3``); the
generation ledger (``tree_hashes``). Plants: a parent folder swapped for a link to a host folder,
a file linked to a host secret, a FIFO, and a file flipped into a link or FIFO between the
listing and the open (made deterministic by flipping it right after the walk lists its folder).

Every case asserts containment (a named refusal or a named skip), that the host folder is byte
for byte unchanged, and that nothing hangs: the operation runs in a thread joined with a
timeout (the hang detector; no speed is asserted).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import threading
import zipfile
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
from kernel_ext.server.archive import NOTES_NAME, portable_name
from kernel_ext.server.handlers.base import STATE_KEY
from kernel_ext.findings import Finding, ValidationReport
from kernel_ext.workspace import treewalk

SECRET = "HOST-SECRET-tree-7d41"
HANG_S = 60.0


def release_fifos(root: Path) -> None:
    """Give every FIFO under ``root`` a writer that closes at once, so a reader stuck on one returns (EOF)."""
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if stat.S_ISFIFO(os.lstat(path).st_mode):
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass  # no reader: nothing is stuck on it


def no_hang(fn, *args, release: Path | None = None, **kwargs):
    """Run ``fn`` in a thread; fail if it has not returned after ``HANG_S`` (a FIFO read would block forever).

    On a hang the FIFOs under ``release`` are unblocked first, so the failure does not hang the suite too.
    """
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(HANG_S)
    if worker.is_alive() and release is not None:
        release_fifos(release)
    assert not worker.is_alive(), f"{getattr(fn, '__name__', fn)} hung (a FIFO or device was opened)"
    if "error" in box:
        raise box["error"]
    return box["value"]


def host_folder(tmp_path: Path) -> Path:
    """The host: a secret file and a folder shaped like the checkpoint's origin (``keep/``)."""
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "keep" / "host-only.txt").write_text("must survive\n")
    (outside / "keep" / "data.txt").write_text("host data\n")
    return outside


def flip_after_listing(monkeypatch, name: str, make, also: tuple[str, ...] = ()) -> list[str]:
    """Deterministic race: right after the walk lists a folder holding ``name``, swap it (and ``also``) via ``make(path)``."""
    real = treewalk.entries
    flipped: list[str] = []

    def entries(fd, skip=frozenset()):
        found = real(fd, skip)
        if name in dict(found) and not flipped:
            path = os.readlink(f"/proc/self/fd/{fd}")
            for each in (name, *also):
                os.unlink(os.path.join(path, each))
                make(os.path.join(path, each))
            flipped.append(path)
        return found

    monkeypatch.setattr(treewalk, "entries", entries)
    return flipped


# -- sh_checkpoint / sh_restore: real tools, real bubblewrap -----------------------------------------

RESTORE_PLANTS = {
    # the sequence: the origin's parent folder becomes a link to a host folder
    "parent-folder-link": ("rm -rf a && ln -s {outside} a", "symlink_refused"),
    # the origin itself becomes a link to the host folder
    "origin-link": ("rm -rf a/keep && ln -s {outside}/keep a/keep", "symlink_refused"),
    # the parent folder becomes a FIFO: not a directory, never opened
    "parent-fifo": ("rm -rf a && mkfifo a", "not_found"),
}


def restore_code(h, entry: str, **arguments) -> str | None:
    """Restore through ``entry`` (the tool through the Executor, or the Python API); the refusal's code."""
    if entry == "tool":
        result = h.call("sh_restore", **arguments)
        return None if result.ok else result.error.code
    try:
        h.shell.restore(**arguments)
    except ToolFailure as exc:
        return str(exc.code)
    return None


@needs_bwrap
@pytest.mark.parametrize("entry", ["tool", "python"])
@pytest.mark.parametrize("with_dir", [False, True], ids=["no-dir", "dir"])
@pytest.mark.parametrize("plant", sorted(RESTORE_PLANTS))
def test_restore_refuses_a_link_or_special_in_the_origins_path(h, tmp_path, plant, with_dir, entry):
    outside = host_folder(tmp_path)
    (h.ws / "a" / "keep").mkdir(parents=True)
    (h.ws / "a" / "keep" / "data.txt").write_text("checkpointed\n")
    assert h.call("sh_checkpoint", label="x", dir="a/keep").ok
    command, code = RESTORE_PLANTS[plant]
    planted = h.call("sh_run", command=command.format(outside=outside))  # from inside the sandbox
    assert planted.ok, planted.observation
    host_before = tree_state(outside)
    arguments = {"label": "x", **({"dir": "a/keep"} if with_dir else {})}
    assert no_hang(restore_code, h, entry, release=h.ws, **arguments) == code
    assert tree_state(outside) == host_before  # nothing deleted, nothing written on the host
    assert (outside / "keep" / "host-only.txt").read_text() == "must survive\n"


@needs_bwrap
def test_restore_card_says_what_it_will_write_and_delete(h):
    (h.ws / "a" / "keep").mkdir(parents=True)
    (h.ws / "a" / "keep" / "one.txt").write_text("1\n")
    (h.ws / "a" / "keep" / "two.txt").write_text("2\n")
    assert h.call("sh_checkpoint", label="x", dir="a/keep").ok
    assert h.call("sh_run", command="echo changed > a/keep/one.txt; echo new > a/keep/added.txt").ok
    restored = h.call("sh_restore", label="x")
    assert restored.ok and restored.data["written"] == 1 and restored.data["removed"] == 1
    card = h.requests[-1].proposal
    assert "will write 1 file(s) or link(s), delete 1 entry" in card and "leave 1 unchanged" in card


@needs_bwrap
@pytest.mark.parametrize("with_dir", [False, True], ids=["no-dir", "dir"])
def test_restore_recreates_a_deleted_origin_inside_the_workspace(h, with_dir):
    (h.ws / "a" / "keep").mkdir(parents=True)
    (h.ws / "a" / "keep" / "data.txt").write_text("checkpointed\n")
    assert h.call("sh_checkpoint", label="x", dir="a/keep").ok
    assert h.call("sh_run", command="rm -rf a").ok
    arguments = {"label": "x", **({"dir": "a/keep"} if with_dir else {})}
    assert no_hang(h.call, "sh_restore", release=h.ws, **arguments).ok
    assert (h.ws / "a" / "keep" / "data.txt").read_text() == "checkpointed\n" and not (h.ws / "a").is_symlink()


@needs_bwrap
@pytest.mark.parametrize("plant", ["parent-folder-link", "origin-link", "parent-fifo"])
def test_checkpoint_refuses_a_link_or_special_in_the_origins_path(h, tmp_path, plant):
    outside = host_folder(tmp_path)
    (h.ws / "a" / "keep").mkdir(parents=True)
    command, code = RESTORE_PLANTS[plant]
    assert h.call("sh_run", command=command.format(outside=outside)).ok
    host_before = tree_state(outside)
    taken = no_hang(h.call, "sh_checkpoint", release=h.ws, label="x", dir="a/keep")
    assert not taken.ok and taken.error.code in (code, "outside_workspace"), taken.observation
    assert h.call("sh_restore", label="x").error.code == "unknown_checkpoint"
    assert not any(SECRET.encode() in p.read_bytes() or b"host data" in p.read_bytes()
                   for p in h.state.rglob("*") if p.is_file() and not p.is_symlink())
    assert tree_state(outside) == host_before


@needs_bwrap
@pytest.mark.parametrize("with_dir", [False, True], ids=["no-dir", "dir"])
def test_checkpoint_and_restore_never_read_a_fifo_or_a_linked_secret(h, tmp_path, with_dir):
    outside = host_folder(tmp_path)
    (h.ws / "a" / "keep").mkdir(parents=True)
    (h.ws / "a" / "keep" / "data.txt").write_text("checkpointed\n")
    plant = f"mkfifo a/keep/pipe && ln -s {outside}/secret.txt a/keep/secret.txt && mkfifo a/keep/late"
    assert h.call("sh_run", command=plant).ok
    host_before = tree_state(outside)
    taken = no_hang(h.call, "sh_checkpoint", release=h.ws, label="x", dir="a/keep")
    assert taken.ok and taken.data["files"] == 1, taken.observation
    assert not any(SECRET.encode() in p.read_bytes() for p in h.state.rglob("*") if p.is_file() and not p.is_symlink())
    swap = "rm -f a/keep/pipe a/keep/data.txt && mkfifo a/keep/data.txt && mkfifo a/keep/extra"  # a FIFO where a file was
    assert h.call("sh_run", command=swap).ok
    arguments = {"label": "x", **({"dir": "a/keep"} if with_dir else {})}
    restored = no_hang(h.call, "sh_restore", release=h.ws, **arguments)
    assert restored.ok, restored.observation
    assert sorted(os.listdir(h.ws / "a" / "keep")) == ["data.txt", "secret.txt"]  # planted FIFOs removed, none opened
    assert (h.ws / "a" / "keep" / "data.txt").read_text() == "checkpointed\n"
    assert os.readlink(h.ws / "a" / "keep" / "secret.txt") == f"{outside}/secret.txt"  # a link stays a link
    assert tree_state(outside) == host_before


# -- the archive over REST ------------------------------------------------------------------------

SCENARIO = json.dumps({"kind": "scenario", "scenario": "side-effects"})


async def waiting_run(jp_fetch, app):
    response = await jp_fetch("besser-agent", "runs", method="POST", body=SCENARIO)
    run = app.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
    await poll(run.pending_approvals)
    return run


async def fetch_archive(jp_fetch, run_id, app: Path):
    try:
        response = await asyncio.wait_for(jp_fetch("besser-agent", "runs", run_id, "archive"), HANG_S)  # the hang detector
    except TimeoutError:
        release_fifos(app)  # unblock the server's worker thread so the failure does not hang the suite
        raise
    return zipfile.ZipFile(io.BytesIO(response.body))


ARCHIVE_PLANTS = ["secret-link", "folder-link", "fifo", "flip-to-link", "flip-to-fifo"]


@pytest.mark.parametrize("plant", ARCHIVE_PLANTS)
async def test_archive_holds_no_host_file_and_never_waits_on_a_fifo(jp_fetch, jp_serverapp, runs_dir, tmp_path, monkeypatch, plant):
    outside = host_folder(tmp_path)
    run = await waiting_run(jp_fetch, jp_serverapp)
    app = runs_dir / run.id / "app"
    (app / "flip.txt").write_text("innocent\n")
    if plant == "secret-link":
        (app / "secret.txt").symlink_to(outside / "secret.txt")
    elif plant == "folder-link":
        (app / "host").symlink_to(outside)
    elif plant == "fifo":
        os.mkfifo(app / "pipe")
    elif plant == "flip-to-link":
        flipped = flip_after_listing(monkeypatch, "flip.txt", lambda p: os.symlink(outside / "secret.txt", p))
    else:
        flipped = flip_after_listing(monkeypatch, "flip.txt", os.mkfifo)
    host_before = tree_state(outside)
    try:
        archive = await fetch_archive(jp_fetch, run.id, app)
        names = archive.namelist()
        assert f"{run.id}/app/calculator.py" in names
        assert not any(SECRET.encode() in archive.read(n) or b"host data" in archive.read(n) for n in names)
        assert not [n for n in names if n.endswith(("/secret.txt", "/pipe")) or "/host/" in n]
        notes = archive.read(f"{run.id}/{NOTES_NAME}").decode()
        expected = {"secret-link": treewalk.SKIPPED_LINK, "folder-link": treewalk.SKIPPED_LINK, "fifo": treewalk.SKIPPED_SPECIAL}
        assert expected.get(plant, treewalk.SKIPPED_RACED) in notes, notes
        if plant.startswith("flip"):
            assert flipped and f"{run.id}/app/flip.txt" not in names
        assert tree_state(outside) == host_before
    finally:
        await jp_fetch("besser-agent", "runs", run.id, "cancel", method="POST", body="{}")


async def test_archive_entry_names_are_portable(jp_fetch, jp_serverapp, runs_dir):
    run = await waiting_run(jp_fetch, jp_serverapp)
    app = runs_dir / run.id / "app"
    planted = ["a\\..\\..\\evil.txt", "C:evil.txt", "CON", "nul.txt", "Com1.tar.gz", "lpt9", "trailing. ", "ok\x01name", "plain.txt"]
    for name in planted:
        (app / name).write_text(f"content of {name!r}\n")
    try:
        archive = await fetch_archive(jp_fetch, run.id, app)
        names = [n.split("/", 1)[1] for n in archive.namelist()]
        for name in names:
            parts = name.split("/")
            assert "\\" not in name and ":" not in name and ".." not in parts and not name.startswith("/"), name
            assert all(p.split(".")[0].strip().upper() not in {"CON", "NUL", "COM1", "LPT9"} for p in parts), name
        assert "app/plain.txt" in names and "app/_CON" in names and "app/a_.._.._evil.txt" in names
        contents = {archive.read(f"{run.id}/{n}").decode() for n in names if n.startswith("app/")}
        assert all(f"content of {name!r}\n" in contents for name in planted)  # renamed, not lost
        notes = archive.read(f"{run.id}/{NOTES_NAME}").decode()
        assert "renamed to a portable name" in notes and "'app/CON' -> app/_CON" in notes
    finally:
        await jp_fetch("besser-agent", "runs", run.id, "cancel", method="POST", body="{}")


@pytest.mark.parametrize(("parts", "expected"), [
    (["app", "x.py"], "app/x.py"), (["..", "x"], None), (["", "x"], None), (["app", "."], None),
    (["C:", "x"], "C_/x"), (["aux.txt"], "_aux.txt"), (["COM\u00b9"], "_COM\u00b9"), (["a\\b"], "a_b"), (["end."], "end_"),
])
def test_portable_names(parts, expected):
    assert portable_name(parts) == expected


# -- Phase 3 snapshots and digests, the generation ledger ---------------------------------------


def planted_app(tmp_path: Path, outside: Path) -> Path:
    app = tmp_path / "app"
    (app / "pkg").mkdir(parents=True)
    (app / "main.py").write_text("print('app')\n")
    (app / "pkg" / "mod.py").write_text("X = 1\n")
    (app / "secret.txt").symlink_to(outside / "secret.txt")
    (app / "host").symlink_to(outside)
    os.mkfifo(app / "pipe")
    os.mkfifo(app / "pkg" / "pipe")
    return app


def test_snapshot_digest_and_restore_skip_fifos_and_never_follow_links(tmp_path):
    outside = host_folder(tmp_path)
    app = planted_app(tmp_path, outside)
    host_before = tree_state(outside)
    taken = no_hang(snapshots.take, app, tmp_path / "snaps", "s1", release=app)
    assert taken.skipped == {treewalk.SKIPPED_SPECIAL: 2} and "2 FIFOs" in taken.note
    assert os.readlink(taken.path / "host") == str(outside) and not (taken.path / "pipe").exists()
    notes = treewalk.Notes()
    first = no_hang(snapshots.tree_digest, app, notes, release=app)
    assert notes[treewalk.SKIPPED_SPECIAL] == 2
    (outside / "secret.txt").write_text("changed on the host\n")  # a followed link would change the digest
    assert no_hang(snapshots.tree_digest, app, release=app) == first
    (outside / "secret.txt").write_text(SECRET + "\n")
    (app / "main.py").write_text("print('repair broke it')\n")
    (app / "added.txt").write_text("added\n")
    no_hang(snapshots.restore, taken, app, release=app)
    assert (app / "main.py").read_text() == "print('app')\n" and not (app / "added.txt").exists()
    assert not (app / "pipe").exists()  # the snapshot never held it: restore removes it, never opens it
    assert tree_state(outside) == host_before


def test_snapshot_skips_a_file_flipped_mid_walk(tmp_path, monkeypatch):
    outside = host_folder(tmp_path)
    app = tmp_path / "app"
    app.mkdir()
    (app / "flip.txt").write_text("innocent\n")
    flipped = flip_after_listing(monkeypatch, "flip.txt", os.mkfifo)
    host_before = tree_state(outside)
    taken = no_hang(snapshots.take, app, tmp_path / "snaps", "s1", release=app)
    assert flipped and taken.skipped == {treewalk.SKIPPED_SPECIAL: 1} and not (taken.path / "flip.txt").exists()
    assert tree_state(outside) == host_before


def test_phase3_with_fifos_and_links_completes_and_notes_the_skip(tmp_path):
    outside = host_folder(tmp_path)
    app = planted_app(tmp_path, outside)
    host_before = tree_state(outside)
    blocker = ValidationReport((Finding("blocker", "test", "still broken"),))
    events: list[tuple[str, dict]] = []

    async def validate():
        return blocker

    async def repair(report, round_no):
        os.mkfifo(app / f"round-{round_no}.fifo")  # a repair round leaves a FIFO behind
        (app / f"round-{round_no}.lnk").symlink_to(outside / "secret.txt")
        return RoundOutcome()

    def main():
        return asyncio.run(run_phase3(app, tmp_path / "snaps", validate, repair, turns_left=0,
                                      emit=lambda kind, **data: events.append((kind, data))))

    result = no_hang(main, release=app)
    assert result.rounds >= 1 and result.stop_reason
    first = events[0]
    assert first[0] == "snapshot" and first[1]["skipped"] == {treewalk.SKIPPED_SPECIAL: 2}
    assert tree_state(outside) == host_before


def test_generation_ledger_hashes_regular_files_only(tmp_path, monkeypatch):
    outside = host_folder(tmp_path)
    app = planted_app(tmp_path, outside)
    (app / "flip.txt").write_text("innocent\n")
    flipped = flip_after_listing(monkeypatch, "flip.txt", lambda p: os.symlink(outside / "secret.txt", p))
    notes = treewalk.Notes()
    hashes = no_hang(tree_hashes, app, notes=notes, release=app)
    assert flipped and sorted(hashes) == ["main.py", "pkg/mod.py"]
    assert notes == {treewalk.SKIPPED_LINK: 2, treewalk.SKIPPED_SPECIAL: 2, treewalk.SKIPPED_RACED: 1}


def test_the_generation_ledger_counts_every_file_raced_in_one_walk(tmp_path, monkeypatch):
    outside = host_folder(tmp_path)
    app = planted_app(tmp_path, outside)
    (app / "flip.txt").write_text("innocent\n")
    (app / "flop.txt").write_text("innocent too\n")
    flipped = flip_after_listing(monkeypatch, "flip.txt", os.mkfifo, also=("flop.txt",))
    notes = treewalk.Notes()
    hashes = no_hang(tree_hashes, app, notes=notes, release=app)
    assert flipped and sorted(hashes) == ["main.py", "pkg/mod.py"]
    assert notes == {treewalk.SKIPPED_LINK: 2, treewalk.SKIPPED_SPECIAL: 2, treewalk.SKIPPED_RACED: 2}  # two raced, two counted


def test_a_missing_app_folder_is_a_named_refusal(tmp_path):
    with pytest.raises(ToolFailure) as refused:
        snapshots.take(tmp_path / "gone", tmp_path / "snaps", "s1")
    assert refused.value.code == "not_found"
