"""Toolchain validation (operator opt-in): do the app's dependencies resolve, does its frontend build?

Each check runs in a one-off sandbox (``sandbox.run_confined``) with the network on (it must reach the package
registries) and nothing of the server writable; a failure is a blocker naming the tool and the
tail of its output. Off unless ``BESSER_LLM_ENABLE_TOOLCHAIN_VALIDATION=1`` or the library
argument turns it on, because it downloads.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from kernel_ext.findings import Finding

PIP_SECONDS = 300
NPM_SECONDS = 600


def toolchain_findings(app_dir: Path) -> list[Finding]:
    from kernel_ext.sandbox import run_confined

    findings: list[Finding] = []
    for requirements in sorted(app_dir.glob("*/requirements.txt")) + sorted(app_dir.glob("requirements.txt")):
        if requirements.is_symlink():
            continue
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-input", "-r", requirements.name]
        record = run_confined(argv, app_dir, PIP_SECONDS, network=True, cwd=requirements.parent, spill_output=False)
        if not record.ok:
            findings.append(_failure("pip", requirements, app_dir, record))
    package = app_dir / "frontend" / "package.json"
    if package.is_file() and not package.is_symlink():
        npm = shutil.which("npm")
        if npm is None:
            findings.append(Finding("warning", "toolchain",
                                    "frontend/package.json exists but npm is not installed here; the build was not checked",
                                    "frontend/package.json", code="toolchain_missing"))
        else:
            for argv in ([npm, "install", "--no-audit", "--no-fund"], [npm, "run", "build"]):
                record = run_confined(argv, app_dir, NPM_SECONDS, network=True, cwd=package.parent, spill_output=False)
                if not record.ok:
                    findings.append(_failure("npm " + argv[1], package, app_dir, record))
                    break
    return findings


def _failure(tool: str, where: Path, app_dir: Path, record) -> Finding:
    tail = (record.stderr.text or record.stdout.text).strip().splitlines()[-3:]
    reason = "timed out" if record.timed_out else f"exit {record.exit_code}"
    return Finding("blocker", "toolchain", f"{tool} failed ({reason}): {' | '.join(tail)[:600]}",
                   str(where.relative_to(app_dir)), code="toolchain_failed")
