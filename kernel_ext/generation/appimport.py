"""Phase 1's app-import check: the generated entry module imported once, in a one-off sandbox.

The import executes model-derived code (a model's method bodies land in the ORM's class
bodies), so it runs only in a fresh sandbox (``run_confined``): the operator's tier, network
off, the scrubbed environment, the host's ``/proc`` and files out of sight, writes only to a
temporary copy of the generated files and a throwaway SQLite database, a timeout.

The copy carries the bytecode the host's syntax check already compiled (``__pycache__``, in
the interpreter's own pyc format, stamped with each source's size and time), so the sandbox
imports without compiling the app a second time: one parse per file per Phase 1. The pyc is
written by the host from its own compile of those exact bytes; a stale or missing one only
makes the interpreter compile the source itself.

The copy is made in the shared-memory tmpfs where there is room (``scratch_dir``), since creating
hundreds of small files on a loaded disk was most of the staging. Measured (bench/bench_phase1.py,
'checks breakdown'), two things the import does not need:
the throwaway database lives in the sandbox's own temporary folder (a private tmpfs in every
confined tier) instead of the copy on disk, where the app's ``create_all`` of one table per
class paid for journal and sync writes; and once the import is done the interpreter leaves at
once (``os._exit`` after flushing), skipping the teardown of every module and mapper the app
built, which grows with the model. The rest is the interpreter's start, the framework's import
(FastAPI, SQLAlchemy, pydantic) and the app's own module bodies: ``confined_import`` is the one
call a pre-imported template interpreter would stand in for.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import tempfile
from pathlib import Path, PurePosixPath
from types import CodeType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernel_ext.sandbox import CommandRecord

__all__ = ["IMPORT_PROGRAM", "confined_import", "import_entry", "scratch_dir", "stage_files"]

SHARED_MEMORY = "/dev/shm"
SCRATCH_FACTOR = 4  # sources, their bytecode (about as large again) and room for neighbours
SCRATCH_MARGIN = 64 << 20  # never take the last of a small /dev/shm (a container's default is 64 MiB)

# What the sandbox runs (the entry module's name is data: ``sys.argv[1]``). The database goes to a
# fresh folder of the sandbox's own temporary space, removed again (under the operator's ``off``
# tier that is the host's /tmp); once imported, the process leaves without tearing the app down
# (a failed import ends as before: its traceback, exit code 1).
IMPORT_PROGRAM = (
    "import importlib, os, shutil, sys, tempfile\n"
    "db = tempfile.mkdtemp(prefix='besser-phase1-db-')\n"
    "os.environ['DATABASE_URL'] = 'sqlite:///' + os.path.join(db, 'phase1-check.db')\n"
    "sys.path.insert(0, '.')\n"
    "try:\n"
    "    importlib.import_module(sys.argv[1])\n"
    "finally:\n"
    "    shutil.rmtree(db, ignore_errors=True)\n"
    "sys.stdout.flush()\n"
    "sys.stderr.flush()\n"
    "os._exit(0)\n"
)


def import_entry(files: dict[str, bytes], code: dict[str, CodeType], root: PurePosixPath, entrypoint: str,
                 timeout: float, policy: str | None) -> tuple[bool, str, str]:
    """(imported, why not, tier): import ``entrypoint`` in a one-off sandbox over a temporary copy of
    ``files`` (those under ``root``), with ``code`` (path -> the host's bytecode) as its pyc."""
    size = sum(len(data) for data in files.values())
    with tempfile.TemporaryDirectory(prefix="besser-phase1-check-", dir=scratch_dir(size)) as tmp:
        base = Path(tmp) / "app"
        stage_files(files, code, root, base)
        done = confined_import(Path(tmp), base, entrypoint, timeout, policy)
        base_text = str(Path(tmp).resolve() / "app")
    if done.timed_out:
        return False, f"did not finish within {timeout:.0f} s", done.tier
    if done.exit_code == 0:
        return True, "", done.tier
    lines = [ln for ln in done.stderr.text.strip().splitlines() if ln.strip()]
    where = next((ln.strip() for ln in reversed(lines) if ln.strip().startswith("File ") and "/app/" in ln), "")
    last = lines[-1].strip() if lines else f"exit code {done.exit_code}"
    return False, (f"{last} ({where.replace(base_text, '')})" if where else last)[:600], done.tier


def scratch_dir(size: int) -> str | None:
    """Where the temporary copy goes: the shared-memory tmpfs (``/dev/shm``) when it is a folder this
    process may write with room for ``size`` bytes of sources (and their bytecode) to spare, else
    the default temporary folder (None). Creating a file on a loaded disk cost ~2-5 ms here, the
    copy of a 200-class app 0.7-2.5 s, against 0.08-0.16 s in memory."""
    try:
        info = os.statvfs(SHARED_MEMORY)
    except OSError:
        return None
    room = info.f_bavail * info.f_frsize
    fits = room >= SCRATCH_FACTOR * size + SCRATCH_MARGIN
    return SHARED_MEMORY if fits and os.path.isdir(SHARED_MEMORY) and os.access(SHARED_MEMORY, os.W_OK | os.X_OK) else None


def stage_files(files: dict[str, bytes], code: dict[str, CodeType], root: PurePosixPath, base: Path) -> None:
    """Write the files under ``root`` into the new folder ``base``, each with its pyc from ``code``."""
    base.mkdir()
    made = {base}
    for path, data in files.items():
        try:
            rel = PurePosixPath(path).relative_to(root)
        except ValueError:
            continue
        target = base.joinpath(*rel.parts)
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        target.write_bytes(data)
        compiled = code.get(path)
        if compiled is not None:
            _write_pyc(target, compiled, made)


def confined_import(workspace: Path, base: Path, entrypoint: str, timeout: float, policy: str | None,
                    program: str = IMPORT_PROGRAM) -> CommandRecord:
    """Import ``entrypoint`` from ``base`` (inside ``workspace``) in a fresh sandbox: the operator's tier,
    network off, nothing written back. The seam for a pre-imported template interpreter (the
    framework already imported, confined the same way): it would answer this call, with the
    same record, leaving only the app's own modules to import."""
    from kernel_ext.sandbox import run_confined

    return run_confined([sys.executable, "-B", "-c", program, entrypoint], workspace, timeout, network=False, cwd=base,
                        env={"PYTHONDONTWRITEBYTECODE": "1"}, policy=policy, spill_output=False,
                        label=f"phase 1: import {entrypoint}")


def _write_pyc(source: Path, code: CodeType, made: set[Path]) -> None:
    """The timestamp pyc (PEP 552: magic, flags 0, mtime, size, marshalled code) the import system
    accepts for ``source`` as it now is on disk."""
    st = source.stat()
    pyc = Path(importlib.util.cache_from_source(str(source)))
    if pyc.parent not in made:
        pyc.parent.mkdir(exist_ok=True)
        made.add(pyc.parent)
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") + \
        (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    with open(pyc, "xb") as out:
        out.write(header + marshal.dumps(code))
