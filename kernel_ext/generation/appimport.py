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
"""

from __future__ import annotations

import importlib.util
import marshal
import sys
import tempfile
from pathlib import Path, PurePosixPath
from types import CodeType

__all__ = ["import_entry"]


def import_entry(files: dict[str, bytes], code: dict[str, CodeType], root: PurePosixPath, entrypoint: str,
                 timeout: float, policy: str | None) -> tuple[bool, str, str]:
    """(imported, why not, tier): import ``entrypoint`` in a one-off sandbox over a temporary copy of
    ``files`` (those under ``root``), with ``code`` (path -> the host's bytecode) as its pyc."""
    from kernel_ext.sandbox import run_confined

    with tempfile.TemporaryDirectory(prefix="besser-phase1-check-") as tmp:
        base = Path(tmp) / "app"
        base.mkdir()
        for path, data in files.items():
            try:
                rel = PurePosixPath(path).relative_to(root)
            except ValueError:
                continue
            target = base.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            compiled = code.get(path)
            if compiled is not None:
                _write_pyc(target, compiled)
        env = {"PYTHONDONTWRITEBYTECODE": "1", "DATABASE_URL": f"sqlite:///{Path(tmp) / 'phase1-check.db'}"}
        program = "import sys; sys.path.insert(0, '.'); import importlib; importlib.import_module(sys.argv[1])"  # the name is data
        done = run_confined([sys.executable, "-B", "-c", program, entrypoint], tmp, timeout, network=False, cwd=base, env=env,
                            policy=policy, spill_output=False, label=f"phase 1: import {entrypoint}")
        base_text = str(Path(tmp).resolve() / "app")
    if done.timed_out:
        return False, f"did not finish within {timeout:.0f} s", done.tier
    if done.exit_code == 0:
        return True, "", done.tier
    lines = [ln for ln in done.stderr.text.strip().splitlines() if ln.strip()]
    where = next((ln.strip() for ln in reversed(lines) if ln.strip().startswith("File ") and "/app/" in ln), "")
    last = lines[-1].strip() if lines else f"exit code {done.exit_code}"
    return False, (f"{last} ({where.replace(base_text, '')})" if where else last)[:600], done.tier


def _write_pyc(source: Path, code: CodeType) -> None:
    """The timestamp pyc (PEP 552: magic, flags 0, mtime, size, marshalled code) the import system
    accepts for ``source`` as it now is on disk."""
    st = source.stat()
    pyc = Path(importlib.util.cache_from_source(str(source)))
    pyc.parent.mkdir(exist_ok=True)
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") + \
        (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    with open(pyc, "xb") as out:
        out.write(header + marshal.dumps(code))
