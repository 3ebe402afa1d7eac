# ruff: noqa: F811 - the h fixture imported from shell_tools_fixtures is requested by name
"""veil's details (seed-004): ``hint`` and ``sandboxed`` in results, ``sh_checkpoints`` with ``dir``,
the sweep of stale temporary homes, and a run's shell ending when its run folder is removed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from sandbox_fixtures import processes_with, token, wait_until
from shell_tools_fixtures import h, harness, needs_bwrap, tree_of  # noqa: F401 - h is a fixture

from kernel_ext.sandbox import tempsweep

# -- hint and sandboxed ----------------------------------------------------------------------------


@needs_bwrap
def test_results_always_say_sandboxed_and_failures_carry_a_hint(h):
    good = h.call("sh_run", command="echo fine")
    assert good.ok and good.data["sandboxed"] is True and "hint" not in good.data
    failed = h.call("sh_run", command="echo boom >&2; exit 3")
    assert failed.error.code == "execution_failed" and failed.data["sandboxed"] is True
    assert "sh_detail" in failed.data["hint"] and "'stderr'" in failed.data["hint"] and failed.data["id"] in failed.data["hint"]
    missing = h.call("sh_run", command="no-such-program-here")
    assert "install_dependencies" in missing.data["hint"]
    unmet = h.call("sh_run", command="true", expect={"file_exists": "nowhere.txt"})
    assert "assertions_failed" in unmet.data["hint"]
    started = h.call("sh_run", command="sleep 30", background=True)
    assert started.ok and started.data["sandboxed"] is True
    h.call("sh_kill", id=started.data["id"], signal="SIGKILL")


@needs_bwrap
def test_hint_and_sandboxed_through_the_tool_cli(tmp_path):
    """``python -m kernel_ext tool --enable-shell sh_run`` (the real Executor, a real sandbox)."""
    env = {**os.environ, "BESSER_SHELL_STATE_DIR": str(tmp_path / "state"), "BESSER_SANDBOX": "bwrap"}
    project = tmp_path / "project"
    project.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_ext", "tool", "--workspace", str(project), "--enable-shell", "--allow", "shell",
         "--approve", "yes", "sh_run", json.dumps({"command": "exit 4"})],
        capture_output=True, text=True, timeout=120, env=env,
    )
    result = json.loads(proc.stdout)
    assert result["ok"] is False and result["data"]["sandboxed"] is True and result["data"]["exit"] == 4
    assert result["data"]["hint"].startswith("exit 4:")
    assert os.listdir(project) == []


# -- sh_checkpoints with dir ----------------------------------------------------------------------


@needs_bwrap
def test_sh_checkpoints_lists_one_folder_with_dir(h):
    (h.ws / "sub" / "f.txt").write_text("x")
    h.call("sh_checkpoint", label="root")
    h.call("sh_checkpoint", label="inner", dir="sub")
    assert [c["label"] for c in h.call("sh_checkpoints", dir="sub").data["checkpoints"]] == ["inner"]
    assert [c["label"] for c in h.call("sh_checkpoints", dir=".").data["checkpoints"]] == ["root"]
    assert [c["label"] for c in h.call("sh_checkpoints").data["checkpoints"]] == ["root", "inner"]
    none = h.call("sh_checkpoints", dir="elsewhere")
    assert none.ok and none.data["checkpoints"] == [] and "no checkpoints of 'elsewhere'" in none.observation
    assert h.call("sh_checkpoints", dir="../..").error.code == "outside_workspace"


# -- the sweep of stale temporary homes ----------------------------------------------------------


def _aged(path, seconds):
    when = time.time() - seconds
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.utime(os.path.join(folder, name), (when, when), follow_symlinks=False)
    os.utime(path, (when, when))


def test_sweep_removes_only_stale_homes_of_this_user_never_through_links(tmp_path):
    day = 24 * 3600
    root = tmp_path / "tmp"
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious.txt").write_text("mine")
    stale = {}
    for prefix in tempsweep.PREFIXES:
        folder = root / f"{prefix}old"
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "f").write_text("x")
        (folder / "escape").symlink_to(keep)  # a link inside: removed as a link, its target untouched
        stale[prefix] = folder
    fresh = root / "besser-home-fresh"
    fresh.mkdir()
    held = root / "besser-apphost-held"
    held.mkdir()
    other = root / "unrelated-old"
    other.mkdir()
    link = root / "besser-home-link"
    link.symlink_to(keep)
    touched = root / "besser-oneoff-home-touched"
    touched.mkdir()
    for folder in (*stale.values(), held, other, touched):
        _aged(folder, day + 60)
    (touched / "new.txt").write_text("recent")  # something inside changed lately: not stale
    tempsweep.hold_temp_home(held)
    try:
        removed = tempsweep.sweep(root)
    finally:
        tempsweep.release_temp_home(held)
    assert sorted(removed) == sorted(f.name for f in stale.values())
    assert sorted(os.listdir(root)) == sorted(["besser-home-fresh", "besser-apphost-held", "unrelated-old", "besser-home-link",
                                               "besser-oneoff-home-touched"])
    assert link.is_symlink() and tree_of(keep) == {"precious.txt": b"mine"}


def test_sweeper_sweeps_at_start(tmp_path):
    folder = tmp_path / "besser-home-gone"
    folder.mkdir()
    _aged(folder, 2 * 24 * 3600)
    sweeper = tempsweep.TempSweeper(tmp_path, interval_s=3600).start()
    try:
        assert wait_until(lambda: not folder.exists(), timeout=10)
    finally:
        sweeper.stop()


# -- a run's session ends with its run folder -----------------------------------------------------


@needs_bwrap
def test_removing_the_run_folder_ends_its_shell(tmp_path):
    hx = harness(tmp_path)
    try:
        marker = token()
        started = hx.call("run_command", command=f"sleep {marker} &")
        assert started.ok and wait_until(lambda: processes_with(marker), timeout=5)
        job_marker = token()
        job = hx.call("sh_run", command=f"sleep {job_marker}", background=True)
        assert job.ok and wait_until(lambda: processes_with(job_marker), timeout=5)
        sibling = tmp_path / "runs" / "r2"
        before = tree_of(sibling)
        shutil.rmtree(hx.ws.parent)  # the person deletes runs/r1 in the file browser
        assert wait_until(lambda: not processes_with(marker) and not processes_with(job_marker), timeout=15)
        again = hx.call("run_command", command="echo still here")
        assert again.error.code == "not_found" and "removed" in again.error.message
        assert tree_of(sibling) == before and not hx.ws.exists()
    finally:
        hx.service.close()


@pytest.mark.parametrize("replaced", [False, True])
def test_registry_ends_a_watched_run_whose_folder_is_gone_or_replaced(tmp_path, replaced):
    from kernel_ext.sandbox.session.registry import SessionRegistry

    folder = tmp_path / "run" / "app"
    folder.mkdir(parents=True)
    registry = SessionRegistry(idle_seconds=0)
    ended = []
    registry.watch("r", folder, lambda: ended.append("r"))
    try:
        assert registry.reap_gone() == [] and ended == []
        other = tmp_path / "other"
        other.mkdir()  # exists beside it, so it cannot reuse its inode
        shutil.rmtree(folder)
        if replaced:
            other.rename(folder)  # the same name, another folder
        assert registry.reap_gone() == ["r"] and ended == ["r"]
        assert registry.reap_gone() == []  # once
    finally:
        registry.close()
