"""Fresh environments that hold this package the way a user's machine would (session-scoped).

``wheel_env``: a new venv with the wheel of this tree installed by a plain ``pip install`` (no
extras), as from an index. ``binder_env``: a new venv into which the real ``binder/postBuild``
installed a copy of this tree, as repo2docker runs it. Each is built once per session and
shared by every test that needs it (they are the slow part). Commands run with a bare
environment (no ``PYTHONPATH``, the venv first on ``PATH``), so nothing of this checkout or of
the test venv can stand in for what was installed; pip keeps its configured index (``PIP_*``,
proxies, certificates), nothing else.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PASSED_ON = ("HOME", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
# Not part of the project a user gets: build outputs, caches, local runs and tools.
NOT_COPIED = {".git", ".venv", "venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache", ".mypy_cache",
              "build", "dist", "besser_runs", ".ipynb_checkpoints", "node_modules", ".hub", "mutants"}
NOT_COPIED_PATHS = {"bench/out", "tests/artifacts", ".ci/node"}


@dataclass(frozen=True)
class Env:
    """A venv and the bare environment its commands run with."""

    prefix: Path
    source: Path | None = None  # the tree it was installed from, where that was a copy

    @property
    def bin(self) -> Path:
        return self.prefix / "bin"

    def environ(self, **extra: str) -> dict[str, str]:
        return bare_environ(self.bin, **extra)

    def run(self, *argv: str | Path, cwd: Path, timeout: float = 600, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in argv], cwd=cwd, env=self.environ(**extra), capture_output=True, text=True,
                              timeout=timeout, check=False)


def bare_environ(bin_dir: Path, **extra: str) -> dict[str, str]:
    """``PATH`` with ``bin_dir`` first, what pip needs to reach its index, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k in PASSED_ON or k.startswith("PIP_") or k.lower().endswith("_proxy")}
    env.setdefault("HOME", "/tmp")
    env.setdefault("LANG", "C.UTF-8")
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    env.update(extra)
    return env


def new_venv(where: Path) -> Env:
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(where)], check=True, timeout=300)
    return Env(where)


def copy_of_project(where: Path) -> Path:
    """This tree as a user's clone holds it (no caches, no build outputs, no local runs)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        relative = Path(folder).relative_to(ROOT)
        return {n for n in names if n in NOT_COPIED or n.endswith(".egg-info") or (relative / n).as_posix() in NOT_COPIED_PATHS}

    shutil.copytree(ROOT, where, ignore=ignore, symlinks=True)
    return where


def failed(what: str, done: subprocess.CompletedProcess) -> str:
    return f"{what} exited {done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}"


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Path:
    """The wheel of this tree, built by pip (the build backend comes from pip's index)."""
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, failed("pip wheel", done)
    (wheel,) = out.glob("besser_jupyter_agent-*.whl")
    return wheel


@pytest.fixture(scope="session")
def wheel_env(tmp_path_factory, built_wheel) -> Env:
    """A fresh venv with the wheel installed as a user installs it: ``pip install``, no extras."""
    env = new_venv(tmp_path_factory.mktemp("wheel-env") / "venv")
    done = env.run(env.bin / "python", "-m", "pip", "install", "--quiet", built_wheel, cwd=built_wheel.parent, timeout=1800)
    assert done.returncode == 0, failed("pip install of the wheel", done)
    return env


@pytest.fixture(scope="session")
def binder_env(tmp_path_factory) -> Env:
    """A fresh venv set up by the real ``binder/postBuild`` of a copy of this tree (its install
    command, whatever it is, run as repo2docker runs it: the environment's python first on PATH)."""
    base = tmp_path_factory.mktemp("binder")
    source = copy_of_project(base / "repo")
    env = new_venv(base / "venv")
    done = env.run("bash", source / "binder" / "postBuild", cwd=base, timeout=1800)
    assert done.returncode == 0, failed("binder/postBuild", done)
    return Env(env.prefix, source)
