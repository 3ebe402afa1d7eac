"""The two kernel generations the Jupyter layer supports, as real kernels for the tests.

``ipykernel7`` is the kernel installed in the environment. ``ipykernel6`` is the same Python
with ipykernel 6 (and the IPython 8 it shipped with) put first on ``PYTHONPATH``: a real
ipykernel 6 process, installed once from PyPI into ``<venv>/kernels/<flavour>`` the first
time a test asks for it. Every test that starts a kernel through ``flavour_env`` also checks
the kernel's own ``ipykernel.__version__``, so a flavour cannot silently fall back.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FLAVOURS = ("ipykernel7", "ipykernel6")  # what every kernel test runs on
# Overlays: the installed Python with another kernel first on PYTHONPATH. ``ipykernel6`` is the
# long-lived 6.29.5 with the IPython 8 it shipped beside; ``ipykernel6-last`` the last 6.x
# release, for the tests of the click relay, which reaches into ipykernel 6's internals.
OVERLAY_PINS = {
    "ipykernel6": ("ipykernel==6.29.5", "ipython==8.37.0", "decorator==5.2.1", "nest_asyncio==1.6.0"),
    "ipykernel6-last": ("ipykernel==6.31.0", "ipython==8.37.0", "decorator==5.2.1", "nest_asyncio==1.6.0"),
}
TREE = str(Path(__file__).resolve().parent.parent)  # the kernel imports this tree's code, not an installed copy
MAJOR = {"ipykernel7": "7", "ipykernel6": "6", "ipykernel6-last": "6"}


def overlay(flavour: str) -> Path:
    """The folder holding ``flavour``'s kernel (installed on first use; pip's errors fail the test)."""
    pins, folder = OVERLAY_PINS[flavour], Path(sys.prefix) / "kernels" / flavour
    stamp = folder / ".pins"
    if stamp.is_file() and stamp.read_text() == "\n".join(pins):
        return folder
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade", "--target", str(folder), *pins],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"could not install {' '.join(pins)} into {folder}:\n{done.stderr[-2000:]}")
    stamp.write_text("\n".join(pins))
    return folder


def flavour_env(flavour: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) set up so a kernel started with it is ``flavour``."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONPATH", None)
    if flavour in OVERLAY_PINS:
        env["PYTHONPATH"] = os.pathsep.join((str(overlay(flavour)), TREE))
    elif flavour != "ipykernel7":
        raise ValueError(f"unknown kernel flavour {flavour!r}")
    else:
        env["PYTHONPATH"] = TREE
    return env


def version_check(flavour: str) -> str:
    """Code for a cell that fails unless the kernel really is ``flavour``."""
    return (
        "import ipykernel as _ipk\n"
        f"assert _ipk.__version__.split('.')[0] == {MAJOR[flavour]!r}, 'kernel is ipykernel ' + _ipk.__version__\n"
        "del _ipk"
    )
