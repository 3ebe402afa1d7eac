"""The import guard: an edit may not make ``sql_alchemy.py`` or ``pydantic_classes.py`` fail to import.

Those two modules are what the generated app boots from; an edit that breaks their import
breaks everything, and it is cheap to catch before the write. The check runs the proposed
source in a separate, time-limited process (``import_worker``): a warm worker that has
already imported SQLAlchemy and pydantic forks once per check, so a check costs the module's
own execution (tens of milliseconds) instead of the library imports (about a second).

``ImportChecker`` is the whole interface: ``check(source, filename) -> ImportVerdict``. A check
executes model-written code, so the worker is always a confined sandbox worker
(``kernel_ext.sandbox.workers.WarmWorker``): the operator's tier, network off, the project
folder readable, only a scratch folder of its own writable, the sandbox's scrubbed
environment (no keys or tokens) plus one explicit variable. Where no tier can start, the
checker is unavailable and guarded edits are refused (fail closed). The checked module runs
with its own directory on ``sys.path``. A refusal happens only on a regression: if the old
version did not import either, the edit is allowed (a broken module must be fixable step by step).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ext.errors import ErrorCode, ToolFailure

if TYPE_CHECKING:
    from kernel_ext.sandbox import WorkerPlan

GUARDED_NAMES = frozenset({"sql_alchemy.py", "pydantic_classes.py"})
DEFAULT_PRELOAD = ("sqlalchemy", "sqlalchemy.orm", "pydantic", "enum", "datetime", "decimal", "typing", "uuid")
PROGRAM = "kernel_ext.tools.import_worker"
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
        from kernel_ext.sandbox import WarmWorker

        self.root = root
        self.python = python
        self.preload = tuple(preload)
        self.timeout = timeout
        self.policy = policy
        self._worker = WarmWorker(self._plan, what="the import checker", policy=policy)
        self._scratch: Path | None = None
        self._ready = False
        self._lock = threading.Lock()

    @property
    def tier(self) -> str:
        """The tier the worker was last started under ('' before any start)."""
        return self._worker.tier

    def command(self) -> list[str]:
        from kernel_ext.sandbox import package_program

        return package_program(PROGRAM, *self.preload, python=self.python)

    def warm(self) -> None:
        """Start the worker without waiting for it (it imports while the model is still thinking)."""
        with self._lock, contextlib.suppress(OSError, ToolFailure):  # the next check reports it (fail closed)
            self._start()

    def check(self, source: str, filename: str, timeout: float | None = None) -> ImportVerdict:
        """Execute ``source`` as the module at ``filename`` in a forked child; report how it went."""
        from kernel_ext.sandbox.frames import FrameError

        limit = self.timeout if timeout is None else timeout
        with self._lock:
            try:
                self._start()
                if not self._ready:
                    self._worker.receive(START_SECONDS)
                    self._ready = True
                reply = self._worker.request({"source": source, "filename": filename, "timeout": limit}, limit + GRACE_SECONDS)
                if not isinstance(reply, dict):
                    raise ValueError("the import checker sent something other than a reply")
            except (OSError, ValueError, TimeoutError, FrameError) as exc:
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

    # -- the worker -----------------------------------------------------------------------------

    def _plan(self) -> WorkerPlan:
        """The worker's confinement: the project readable, a scratch folder of its own writable."""
        from kernel_ext.sandbox import Confinement, WorkerPlan

        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="besser-import-check-"))
        for name in ("rw", "home"):
            (self._scratch / name).mkdir(exist_ok=True)
        conf = Confinement.for_run(self._scratch / "rw", self._scratch / "home", network=False,
                                   readable=[self.root])
        return WorkerPlan(self.command(), conf, {"PYTHONDONTWRITEBYTECODE": "1"})

    def _start(self) -> None:
        if self._worker.start():
            self._ready = False

    def _stop(self) -> None:
        self._worker.stop()
        self._ready = False


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


def close_checkers_under(folder: str) -> int:
    """Close the checkers of every root in ``folder`` (a run's, at its end: its worker would
    otherwise stay warm until eight newer roots pushed it out); how many were closed."""
    base = os.path.realpath(folder)
    with _CHECKERS_LOCK:
        roots = [root for root in _CHECKERS if os.path.realpath(root) == base or os.path.realpath(root).startswith(base + os.sep)]
        entries = [_CHECKERS.pop(root) for root in roots]
    for entry in entries:
        entry.close()  # waits for a check under way: nothing is taken from a check in flight
    return len(entries)


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
        raise ToolFailure(ErrorCode.CHECKER_UNAVAILABLE,
                          f"{display!r} is import-guarded and the checker could not run: {verdict.error}")
    if old_text is not None:
        before = checker.check(old_text, filename)
        if not before.ok and not before.unavailable:
            return f"note: {display} still fails to import ({verdict.error}); it failed before this edit too"
    raise ToolFailure(
        ErrorCode.BREAKS_IMPORT,
        f"this edit would make {display!r} fail to import: {verdict.error}. Nothing was written",
        {"import_error": verdict.error, "timed_out": verdict.timed_out},
    )
