"""Helpers shared by the export tests (imported, not a conftest): the demo run, made once per module
by the real command line, and a copy of it in a run store a test may change."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_ID = "handin-demo-1"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    """The demo run, made once by ``python -m kernel_ext demo`` (replay provider, approve all).
    ``BESSER_TEST_DEMO_RUN`` (set by ``bench/mutation.py``) names a folder where one is made once and
    copied from: a mutant's test run then skips the demo (no export code runs in making it)."""
    out = tmp_path_factory.mktemp("demo") / RUN_ID
    cached = os.environ.get("BESSER_TEST_DEMO_RUN")
    if cached and Path(cached).is_dir():
        shutil.copytree(cached, out, symlinks=True)
        return out
    _make_demo(out)
    if cached:
        shutil.copytree(out, cached, symlinks=True)
    return out


def _make_demo(out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "kernel_ext", "demo", "--out", str(out)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.fixture
def run_copy(demo_run, tmp_path) -> Path:
    """A copy of the demo run in ``<tmp>/besser_runs/`` (where the in-process magic looks)."""
    target = tmp_path / "besser_runs" / RUN_ID
    shutil.copytree(demo_run, target, symlinks=True)
    return target


def folder_state(root: Path) -> dict[str, str]:
    """Every path under ``root`` (links not followed) with its content's hash, a link's target or ``dir``."""
    state: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            state[str(path.relative_to(root))] = "link:" + os.readlink(path)
        elif path.is_file():
            state[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            state[str(path.relative_to(root))] = "dir"
    return state


def inflate_turns(run_dir: Path, size: int) -> int:
    """Grow the run's recorded turns to about ``size`` bytes (each exchange's first message longer,
    with quotes and backslashes to escape), as a long run near the 64 MiB cap; the size written."""
    path = run_dir / ".besser" / "turns.cassette.jsonl"
    lines = path.read_text(encoding="utf-8").split("\n")
    lines = [line for line in lines if line.strip()]
    per = max(0, size - sum(len(line) + 1 for line in lines)) // (len(lines) - 1)
    filler = "word 'quoted' \"and\" back\\slash "
    for i in range(1, len(lines)):
        exchange = json.loads(lines[i])
        exchange["append"][0]["text"] += " " + (filler * (per // len(filler) + 1))[: max(0, per - per // 16)]
        lines[i] = json.dumps(exchange)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path.stat().st_size
