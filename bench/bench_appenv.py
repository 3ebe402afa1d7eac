"""The app's own environment (``kernel_ext.appenv``): first build and cached reuse, beside a bare venv.

A wheelhouse of 12 small wheels (real wheels, written by ``tests/wheel_factory.py``; eight of
them dependencies of the other four) stands for an app's extra requirements. Measured, offline:
- ``first build``: ``environment_for`` with an empty cache: plan against the server, then
  ``pip install --target`` inside a one-off sandbox, manifest, rename into place;
- ``cached reuse``: the same requirements in a fresh process state (memo cleared): plan, then
  the cached overlay found by its key;
- baseline: a bare ``python -m venv`` plus ``pip install --no-index --find-links`` of the same
  requirements, unsandboxed (what a person would type).

Run: ``.venv/bin/python bench/bench_appenv.py``
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from common import emit, figure  # noqa: E402
from wheel_factory import make_wheel  # noqa: E402

ROUNDS_BUILD = 5
ROUNDS_REUSE = 30
ROUNDS_VENV = 3


def wheelhouse(folder: Path) -> str:
    for top in range(4):
        deps = [f"besser-bench-dep{top}{i}>=1" for i in range(2)]
        make_wheel(folder, f"besser-bench-top{top}", "1.0", requires=deps)
        for i in range(2):
            make_wheel(folder, f"besser-bench-dep{top}{i}", "1.1")
    return "".join(f"besser-bench-top{top}==1.0\n" for top in range(4))


def main() -> None:
    from kernel_ext.appenv import environment as appenv
    from kernel_ext.appenv.settings import AppEnvSettings

    scratch = Path(tempfile.mkdtemp(prefix="bench-appenv-"))
    try:
        house = scratch / "wheelhouse"
        requirements = wheelhouse(house)
        build, reuse, venv = [], [], []
        for n in range(ROUNDS_BUILD):
            settings = AppEnvSettings(cache=scratch / f"cache{n}", wheelhouse=house)
            appenv._memo.clear()
            started = time.perf_counter()
            found = appenv.environment_for(requirements, settings=settings)
            build.append((time.perf_counter() - started) * 1000)
            assert found.built_s is not None and len(found.packages) == 4, found
        for _ in range(ROUNDS_REUSE):
            appenv._memo.clear()
            started = time.perf_counter()
            found = appenv.environment_for(requirements, settings=settings)
            reuse.append((time.perf_counter() - started) * 1000)
            assert found.built_s is None and found.key
        (scratch / "requirements.txt").write_text(requirements)
        for n in range(ROUNDS_VENV):
            target = scratch / f"venv{n}"
            started = time.perf_counter()
            subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(target)], check=True)
            subprocess.run([str(target / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            "--no-index", "--find-links", str(house), "-r", str(scratch / "requirements.txt")],
                           check=True, env={**os.environ, "PIP_NO_INPUT": "1"})
            venv.append((time.perf_counter() - started) * 1000)
        print(f"first build   median {sorted(build)[len(build) // 2]:.0f} ms over {len(build)}")
        print(f"cached reuse  median {sorted(reuse)[len(reuse) // 2]:.1f} ms over {len(reuse)}")
        print(f"bare venv     median {sorted(venv)[len(venv) // 2]:.0f} ms over {len(venv)}")
        base = ("python -m venv + pip install", venv)
        emit([
            figure("app env first build (12 wheels, sandboxed pip --target)", build, "ms", baseline=base, group="appenv"),
            figure("app env cached reuse (plan + cache lookup)", reuse, "ms", baseline=base, group="appenv"),
        ])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
