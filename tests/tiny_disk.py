"""A real, tiny, full-able disk for one scenario: a tmpfs in a private mount namespace.

``run_on_tiny_disk(scenario, mountpoint, size)`` runs ``tiny_disk_child.py SCENARIO`` in a
fresh mount namespace (``unshare -m`` as root, ``unshare -rm`` otherwise) where ``mountpoint``
is a tmpfs of ``size``; the host never sees the mount, and it disappears with the process.
The child prints one JSON line, returned as a dict. ``tiny_disk_cause()`` says why this
cannot work here (None when it can), for a ``skipif``.

Chosen over RLIMIT_FSIZE because a file-size limit fails only the one process writing (with
SIGXFSZ), while a full filesystem fails every writer the same way a real full disk does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

CHILD = Path(__file__).with_name("tiny_disk_child.py")
PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)
MOUNT = 'mount -t tmpfs -o "size=$1,mode=0755" tmpfs "$2" && shift 2 && exec "$@"'


def _unshare() -> list[str] | None:
    if shutil.which("unshare") is None:
        return None
    return ["unshare", "-m", "--propagation", "private"] if os.geteuid() == 0 else ["unshare", "-rm", "--propagation", "private"]


@lru_cache(maxsize=1)
def tiny_disk_cause() -> str | None:
    prefix = _unshare()
    if prefix is None:
        return "util-linux unshare is not installed"
    with tempfile.TemporaryDirectory(prefix="tiny-disk-probe-") as probe:
        try:
            done = subprocess.run([*prefix, "sh", "-c", MOUNT, "sh", "1m", probe, "sh", "-c", "head -c 2000000 /dev/zero > \"$0/x\"", probe],
                                  capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unshare could not run: {exc}"
        if done.returncode == 0 or "No space left" not in done.stderr:
            return f"no private tmpfs here (exit {done.returncode}): {done.stderr.strip()[-200:]}"
    return None


def run_on_tiny_disk(scenario: str, mountpoint: Path, size: str, *args: str, env: dict | None = None, timeout: float = 120) -> dict:
    """Run the child's ``scenario`` with ``mountpoint`` as a fresh tmpfs of ``size``; its JSON answer."""
    prefix = _unshare()
    assert prefix is not None, tiny_disk_cause()
    mountpoint.mkdir(parents=True, exist_ok=True)
    argv = [*prefix, "sh", "-c", MOUNT, "sh", size, str(mountpoint),
            sys.executable, str(CHILD), PACKAGE_PARENT, scenario, str(mountpoint), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, f"child failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return json.loads(lines[-1])
