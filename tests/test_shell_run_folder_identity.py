"""A run's shell is bound to its folder as it was: once the folder is removed, replaced by a link,
or replaced by another folder, every shell tool of that run refuses (``not_found``) and nothing runs
in, reads or writes the new target. Through the real Executor, for run_command, install_dependencies
and sh_run (foreground and background)."""

from __future__ import annotations

import shutil

import pytest
from shell_tools_fixtures import harness, tree_of

CALLS = [
    ("run_command", {"command": "cat victim.txt; echo pwned > pwned.txt"}),
    ("install_dependencies", {"command": "echo pwned > pwned.txt"}),
    ("sh_run", {"command": "cat victim.txt; echo pwned > pwned.txt"}),
    ("sh_run", {"command": "echo pwned > pwned.txt; sleep 5", "background": True}),
]


def _swap(ws, victim, how):
    moved = ws.with_name(ws.name + "-moved")
    ws.rename(moved)
    if how == "link":
        ws.symlink_to(victim)
    elif how == "new folder":
        ws.mkdir()
    return moved


@pytest.mark.parametrize("how", ["link", "new folder", "removed"])
@pytest.mark.parametrize("name,arguments", CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CALLS)])
def test_a_swapped_run_folder_ends_every_shell_tool(tmp_path, how, name, arguments):
    h = harness(tmp_path)
    try:
        first = h.executor.execute_sync(_call("run_command", {"command": "echo before > mine.txt"}))
        assert first.ok, first.observation
        victim = tmp_path / "victim"
        victim.mkdir()
        (victim / "victim.txt").write_text("VICTIM-DATA")
        before = tree_of(victim)
        moved = _swap(h.ws, victim, how)
        result = h.executor.execute_sync(_call(name, arguments))
        assert not result.ok and result.error is not None and result.error.code == "not_found", result.observation
        assert "VICTIM-DATA" not in result.observation
        assert tree_of(victim) == before  # nothing written through the link
        assert not (moved / "pwned.txt").exists()
        if how == "new folder":
            assert list(h.ws.iterdir()) == []
    finally:
        h.service.close()
        for leftover in (h.ws,):
            if leftover.is_symlink():
                leftover.unlink()
        shutil.rmtree(tmp_path / "victim", ignore_errors=True)


def _call(name, arguments):
    from kernel_ext.boundary import ToolCall

    return ToolCall("c1", name, arguments)
