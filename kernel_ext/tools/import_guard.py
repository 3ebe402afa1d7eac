"""The import guard: an edit may not make ``sql_alchemy.py`` or ``pydantic_classes.py`` fail to import.

Those two modules are what the generated app boots from; an edit that breaks their import
breaks everything, and it is cheap to catch before the write. The check runs the proposed
source in a separate, time-limited process (``import_worker``): a warm worker that has
already imported SQLAlchemy and pydantic forks once per check, so a check costs the module's
own execution (tens of milliseconds) instead of the library imports (about a second).

``ImportChecker`` is the whole interface: ``check(source, filename) -> ImportVerdict``. A check
executes model-written code, so the worker is always a confined sandbox worker
(``kernel_ext.sandbox.workers``): the operator's tier, network off, the project folder
readable, only a scratch folder of its own writable, the scrubbed environment (no keys or
tokens). Where no tier can start, the checker is unavailable and guarded edits are refused
(fail closed). The checked module runs with its own directory on ``sys.path``. A refusal
happens only on a regression: if the old version did not import either, the edit is allowed
(a broken module must be fixable step by step).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernel_ext import safejson
from kernel_ext.errors import ErrorCode, ToolFailure

GUARDED_NAMES = frozenset({"sql_alchemy.py", "pydantic_classes.py"})
DEFAULT_PRELOAD = ("sqlalchemy", "sqlalchemy.orm", "pydantic", "enum", "datetime", "decimal", "typing", "uuid")
WORKER = Path(__file__).with_name("import_worker.py")
_HEADER = struct.Struct(">I")
START_SECONDS = 60.0
GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class ImportVerdict:
    ok: bool
    error: str = ""
    timed_out: bool = False
    unavailable: bool = False  # the checker itself could not run: callers fail closed


def is_guarded(path: str) -> bool:
    return path.replace("\\", "/").rsplit("/", 1)[-1] in GUARDED_NAMES


class ImportChecker:
    """One warm confined worker, started on first use, restarted after any protocol failure.

    ``root`` is the project folder the checked modules may import siblings from (read-only
    inside the sandbox); ``policy`` overrides the operator's tier (tests).
    """

    def __init__(
        self,
        root: str,
        *,
        python: str = sys.executable,
        preload: Sequence[str] = DEFAULT_PRELOAD,
        timeout: float = 10.0,
        policy: str | None = None,
    ):
        self.root = root
        self.python = python
        self.preload = tuple(preload)
        self.timeout = timeout
        self.policy = policy
        self.tier = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._scratch: Path | None = None
        self._ready = False
        self._lock = threading.Lock()

    def command(self) -> list[str]:
        return [self.python, "-I", "-B", str(WORKER), *self.preload]

    def warm(self) -> None:
        """Start the worker without waiting for it (it imports while the model is still thinking)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                try:
                    self._spawn()
                except (OSError, ToolFailure):
                    self._proc = None  # the next check reports it (fail closed)

    def check(self, source: str, filename: str, timeout: float | None = None) -> ImportVerdict:
        """Execute ``source`` as the module at ``filename`` in a forked child; report how it went."""
        limit = self.timeout if timeout is None else timeout
        with self._lock:
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._spawn()
                assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
                if not self._ready:
                    self._read(time.monotonic() + START_SECONDS)
                    self._ready = True
                request = json.dumps({"source": source, "filename": filename, "timeout": limit}).encode("utf-8")
                self._proc.stdin.write(_HEADER.pack(len(request)) + request)
                self._proc.stdin.flush()
                reply = self._read(time.monotonic() + limit + GRACE_SECONDS)
            except (OSError, ValueError, TimeoutError, AssertionError) as exc:
                self._stop()
                return ImportVerdict(False, f"the import checker failed: {exc}", unavailable=True)
            except ToolFailure as exc:
                self._stop()
                return ImportVerdict(False, f"the import checker cannot run: {exc.message}", unavailable=True)
        return ImportVerdict(bool(reply.get("ok")), str(reply.get("error", "")), bool(reply.get("timed_out")))

    def close(self) -> None:
        with self._lock:
            self._stop()
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None

    # -- process plumbing ---------------------------------------------------------------------

    def _spawn(self) -> None:
        from kernel_ext.sandbox.spec import Confinement
        from kernel_ext.sandbox.workers import start_worker

        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="besser-import-check-"))
        for name in ("rw", "home"):
            (self._scratch / name).mkdir(exist_ok=True)
        conf = Confinement.for_run(self._scratch / "rw", self._scratch / "home", network=False,
                                   readable=[self.root])
        worker = start_worker(self.command(), conf, policy=self.policy, env={"PYTHONDONTWRITEBYTECODE": "1"})
        self._proc, self.tier = worker.process, str(worker.tier)
        self._ready = False

    def _read(self, deadline: float) -> dict:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        (length,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
        return safejson.loads(_read_exact(fd, length, deadline).decode("utf-8"))

    def _stop(self) -> None:
        proc, self._proc, self._ready = self._proc, None, False
        if proc is not None:
            from kernel_ext.sandbox.workers import stop_worker

            stop_worker(proc)


def _read_exact(fd: int, size: int, deadline: float) -> bytes:
    data = b""
    while len(data) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no answer from the import checker in time")
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise OSError("the import checker exited")
        data += chunk
    return data


_CHECKERS: OrderedDict[str, ImportChecker] = OrderedDict()
_CHECKERS_LOCK = threading.Lock()
MAX_CHECKERS = 8


def checker_for_root(root: str) -> ImportChecker:
    """The warm checker for one workspace root, used when a run installs none.

    The project is readable to its worker (see ``ImportChecker``). The least recently used
    checker is closed when a ninth root needs one.
    """
    with _CHECKERS_LOCK:
        entry = _CHECKERS.pop(root, None) or ImportChecker(root)
        _CHECKERS[root] = entry
        evicted = _CHECKERS.popitem(last=False)[1] if len(_CHECKERS) > MAX_CHECKERS else None
    if evicted is not None:
        evicted.close()
    return entry


def close_checkers() -> None:
    with _CHECKERS_LOCK:
        entries = list(_CHECKERS.values())
        _CHECKERS.clear()
    for entry in entries:
        entry.close()


atexit.register(close_checkers)


def guard_import(checker: ImportChecker, display: str, filename: str, new_text: str, old_text: str | None) -> str:
    """Refuse (``breaks_import``) when ``new_text`` fails to import and ``old_text`` did not.

    Returns a note for the observation ('' when the new version imports).
    """
    verdict = checker.check(new_text, filename)
    if verdict.ok:
        return ""
    if verdict.unavailable:
        raise ToolFailure(ErrorCode.CHECKER_UNAVAILABLE, f"{display!r} is import-guarded and the checker could not run: {verdict.error}")
    if old_text is not None:
        before = checker.check(old_text, filename)
        if not before.ok and not before.unavailable:
            return f"note: {display} still fails to import ({verdict.error}); it failed before this edit too"
    raise ToolFailure(
        ErrorCode.BREAKS_IMPORT,
        f"this edit would make {display!r} fail to import: {verdict.error}. Nothing was written",
        {"import_error": verdict.error, "timed_out": verdict.timed_out},
    )
