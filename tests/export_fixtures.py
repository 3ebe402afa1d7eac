"""Helpers shared by the export tests (imported, not a conftest): the demo run, made once per module
by the real command line, and a copy of it in a run store a test may change."""

from __future__ import annotations

import hashlib
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
    """The demo run, made once by ``python -m kernel_ext demo`` (replay provider, approve all)."""
    out = tmp_path_factory.mktemp("demo") / RUN_ID
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "kernel_ext", "demo", "--out", str(out)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out


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
