"""The project's own code passes its lint and type checks: ``make test`` runs both.

``ruff check`` and ``mypy`` read their settings from ``pyproject.toml`` ([tool.ruff],
[tool.mypy]), so a person running either by hand sees exactly what this test sees. Each check
runs from the repository root as its own process; any finding fails the test with the tool's
output. The paths under rework in the sandbox split are left out in that configuration, with
a comment, until that split lands.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _check(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's packages, not an installed copy
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(("ruff", "check", "--no-cache", "kernel_ext", "widgets"), id="ruff"),
        pytest.param(("mypy",), id="mypy"),  # files, strictness and third-party exceptions: [tool.mypy]
    ],
)
@pytest.mark.timeout(1200)  # ruff and mypy get 900 s each (their own bound)
def test_the_code_passes_its_static_checks(argv):
    done = _check(*argv)
    assert done.returncode == 0, f"`{' '.join(argv)}` found problems:\n{done.stdout}{done.stderr}"
