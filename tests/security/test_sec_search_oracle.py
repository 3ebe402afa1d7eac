"""``search_in_files`` is no oracle on host files, however a folder is swapped for a link.

The class: ripgrep opens paths itself, so if it ever resolves a path the fence did not open,
its choice of files (or a fenced read refused because of it) tells the model whether a host
file matches its pattern, one regex at a time. A sandboxed background job can swap a folder
for a link to a host folder (``renameat2(RENAME_EXCHANGE)``) at any moment. Each case asks the
same question with a pattern only the host file matches and one nothing matches: the two
answers must be identical, name nothing of the host, and leave everything outside the run as it
was. Driven through the Python API (the real Executor, the swap made deterministically at each
moment between the fence walk and ripgrep) and the ``tool`` / ``calls`` CLIs (the link in place
before the call). REST reaches this tool only inside a hosted run's tool loop (the same Executor).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel_ext.tools import search as search_module
from kernel_ext.tools.search import RG_MIN_FILES, rg_path

from .world import HOST_SECRET, World, call, file_executor

REPO = Path(__file__).resolve().parents[2]
MATCH_HOST = "HOST-SECRET"  # only the host file matches
MATCH_NONE = "NO-SUCH-TEXT-7f3a"  # nothing matches
pytestmark = pytest.mark.skipif(rg_path() is None, reason="ripgrep is not installed")


def fenced_tree(world: World) -> None:
    """``d/`` holding the host folder's file names with harmless content, and enough files for rg."""
    d = world.ws / "d"
    d.mkdir()
    (d / "host_secret.txt").write_text("nothing to see\n")
    (d / "module.py").write_text("VALUE = 'inside'\n")
    fill = d / "fill"
    fill.mkdir()
    for n in range(RG_MIN_FILES):
        (fill / f"f{n}.txt").write_text(f"filler {n}\n")
    os.symlink(world.outside, world.ws / "lnk")  # the link a background job swaps with d


def exchange(a: Path, b: Path) -> None:
    """``renameat2(a, b, RENAME_EXCHANGE)``: what a sandboxed job does, atomically."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    if libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def comparable(ok: bool, observation: str, data: dict[str, Any], pattern: str) -> tuple:
    assert HOST_SECRET not in observation and HOST_SECRET not in json.dumps(data)
    return ok, observation.replace(pattern, "<P>"), json.dumps(data, sort_keys=True).replace(pattern, "<P>")


MOMENTS = ["before_fence_open", "before_rg_spawn"]


@pytest.mark.parametrize("start", [".", "d"])
@pytest.mark.parametrize("moment", MOMENTS)
def test_api_swap_between_walk_and_ripgrep_tells_nothing(world, monkeypatch, moment, start):
    fenced_tree(world)
    executor = file_executor(world.ws)
    baseline = call(executor, "search_in_files", pattern="filler 7", path=".")
    assert baseline.ok and baseline.data["engine"] == "rg", baseline.observation  # rg really is in play
    rg_saw: list[bytes] = []
    swaps: list[str] = []
    original_candidates, original_run = search_module._rg_candidates, search_module.run_rg

    def swap_then_candidates(*args, **kwargs):
        exchange(world.ws / "d", world.ws / "lnk")
        swaps.append(moment)
        return original_candidates(*args, **kwargs)

    def swap_then_run(argv, fd):
        exchange(world.ws / "d", world.ws / "lnk")
        swaps.append(moment)
        proc = original_run(argv, fd)
        rg_saw.append(proc.stdout if proc else b"")
        return proc

    if moment == "before_fence_open":
        monkeypatch.setattr(search_module, "_rg_candidates", swap_then_candidates)
    else:
        monkeypatch.setattr(search_module, "run_rg", swap_then_run)
    answers = []
    for pattern in (MATCH_HOST, MATCH_NONE):
        result = call(executor, "search_in_files", pattern=pattern, path=start)
        assert swaps == [moment], "the swap must happen between the walk and ripgrep"
        exchange(world.ws / "d", world.ws / "lnk")  # back as it was, for the next question
        swaps.clear()
        answers.append(comparable(result.ok, result.observation, dict(result.data), pattern))
        assert result.data.get("total", 0) == 0, result.observation
    assert answers[0] == answers[1]
    if moment == "before_rg_spawn" and start == ".":
        # rg started in the folder the fence opened: it never read the host file, so it named nothing.
        assert rg_saw and all(b"host_secret" not in out for out in rg_saw), rg_saw
    assert (world.ws / "d").is_dir() and not (world.ws / "d").is_symlink()
    assert world.unchanged()


def _tool_cli(ws: Path, pattern: str, start: str) -> tuple:
    argv = [sys.executable, "-m", "kernel_ext", "tool", "--workspace", str(ws), "search_in_files",
            json.dumps({"pattern": pattern, "path": start})]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
    assert proc.stdout and "Traceback" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    return comparable(out["ok"], out["observation"], out.get("data") or {}, pattern)


def _calls_cli(ws: Path, pattern: str, start: str) -> tuple:
    calls = [{"name": "search_in_files", "arguments": {"pattern": pattern, "path": start}}]
    argv = [sys.executable, "-m", "kernel_ext", "calls", "--workspace", str(ws), json.dumps(calls)]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
    assert proc.stdout and "Traceback" not in proc.stderr, proc.stderr
    (out,) = json.loads(proc.stdout)
    return comparable(out["ok"], out["observation"], out.get("data") or {}, pattern)


@pytest.mark.parametrize("start", [".", "d"])
@pytest.mark.parametrize("cli", [_tool_cli, _calls_cli], ids=["tool", "calls"])
def test_cli_with_a_folder_already_a_host_link_tells_nothing(world, cli, start):
    fenced_tree(world)
    exchange(world.ws / "d", world.ws / "lnk")  # d is now the link to the host folder
    answers = [cli(world.ws, pattern, start) for pattern in (MATCH_HOST, MATCH_NONE)]
    assert answers[0] == answers[1]
    assert not re.search(r'"total": [1-9]', answers[0][2]), answers[0]
    assert world.unchanged()


def test_ripgrep_runs_in_the_opened_folder_not_the_path(tmp_path):
    """The child's ``/proc/self/fd/N`` cwd is the descriptor's folder even after the path was swapped."""
    fenced, host = tmp_path / "fenced", tmp_path / "host"
    fenced.mkdir(), host.mkdir()
    (fenced / "a.txt").write_text("inside\n")
    (host / "a.txt").write_text(f"{HOST_SECRET}\n")
    fd = os.open(fenced, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.rename(fenced, tmp_path / "moved")
        os.symlink(host, fenced)
        proc = search_module.run_rg([rg_path(), "--files-with-matches", "--no-config", "--", "SECRET|inside", "."], fd)
        pwd = subprocess.run(["pwd", "-P"], check=False, cwd=f"/proc/self/fd/{fd}", pass_fds=(fd,), capture_output=True, text=True)
    finally:
        os.close(fd)
    assert proc is not None and proc.returncode == 0
    assert proc.stdout.strip() == b"./a.txt" or proc.stdout.strip() == b"a.txt"
    assert pwd.stdout.strip() == str(tmp_path / "moved")
    assert (host / "a.txt").read_text() == f"{HOST_SECRET}\n"
