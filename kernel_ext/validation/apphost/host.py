"""Host side: the server's handle on one warm app host: start it sandboxed, stage source, run jobs.

The app runs with the server's interpreter and packages, plus an overlay of what its own
``requirements.txt`` needs and the server lacks (``kernel_ext.appenv``): ``stage`` settles the
environment first, and a host started with another overlay is restarted with the new one.
The host process (``apphost.main``) runs under the operator's sandbox tier with the network
unshared (bubblewrap: a new network namespace; Landlock: TCP denied), whether or not shell
tools are enabled, with the scrubbed environment every sandboxed command gets. It sees the
staged source read-only; each child copies it. Jobs are framed JSON over the host's stdin and
stdout (a ``WarmWorker``: ``spawn_confined`` underneath, one framing module for both sides);
several may be outstanding (replays run two at a time). A host that died is started again on
the next job; ``close`` ends it and everything it started. ``busy`` counts the jobs in flight
and the stagings under way: ``stop_if_idle`` (the host table's reaper, ``validation/hosting.py``)
stops only a host nothing uses, and its next job starts it again. A run's host may have been
started before the run asked for it (``apphost.ready``: the same start, made ahead of need);
``start_note`` then says so in every report, as it says why a host was started cold.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from kernel_ext.appenv.environment import AppEnvironment, EnvironmentDescription, environment_for
from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox import hold_temp_home, make_temp_home, release_temp_home
from kernel_ext.sandbox.frames import JSONValue, as_object, number
from kernel_ext.validation.staging import Source

if TYPE_CHECKING:
    import subprocess

    from kernel_ext.sandbox import WorkerPlan

log = logging.getLogger(__name__)

ENV_RESTART_NOTE = ("app host started cold: the app declares its own environment (requirements beyond the server's), "
                    "so it runs in a host started with that overlay, not a ready one")
START_TIMEOUT_S = 90.0
JOB_TIMEOUT_S = 60.0
STOP_GRACE_S = 3.0
KEEP_STAGED = 4
PROGRAM = "kernel_ext.validation.apphost.main"


@dataclass(frozen=True)
class Staged:
    path: Path
    digest: str
    entry: str
    attr: str
    environment: AppEnvironment | None = None


Reply = dict[str, JSONValue]  # the host's reply frame to one job: ``op`` is "result" or "error"


@dataclass(frozen=True)
class PendingJob:
    """A job sent to the host: ``future`` gets its reply; ``timeout`` is what the host enforces."""

    future: Future[Reply]
    timeout: float


class HostDescription(TypedDict):
    """For the run's metadata: how the host is confined and what the app runs with."""

    tier: str
    network: bool
    notes: list[str]
    starts: int
    preload_ms: JSONValue
    warm_ms: JSONValue
    environment: EnvironmentDescription | None


class AppHost:
    """One sandboxed warm host (lazily started). Thread-safe."""

    def __init__(self, *, policy: str | None = None, standby: bool = True, start_timeout: float = START_TIMEOUT_S):
        from kernel_ext.sandbox import WarmWorker

        self.policy = policy
        self.standby = standby
        self.start_timeout = start_timeout
        self.scratch = make_temp_home("besser-apphost-")
        hold_temp_home(self.scratch)  # a warm host may outlive a day in a long-running server
        for sub in ("src", "rw", "home/.tmp"):
            (self.scratch / sub).mkdir(parents=True, exist_ok=True)
        self.ready: Reply = {}
        self.environment: AppEnvironment | None = None  # what the last staged source runs with
        self._paths: tuple[Path, ...] = ()  # the app's own package folders the running host was started with
        self.shell_tools = False  # the run may call install_dependencies (api_test sets it; refusals say so)
        self.submitted = 0  # jobs sent (tests use it to show a refusal ran nothing)
        self.start_note = ""  # how the running host came to be, when worth saying (a note on every report)
        self.exit_reason = ""  # how the last process ended ("" while none has)
        self.after_first_job: Callable[[], None] | None = None  # called once, by the first ``wait`` to get a reply
        self._worker = WarmWorker(self._plan, what="the app host", policy=policy, log_path=self.scratch / "host.log")
        self._lock = threading.RLock()
        self._pending: dict[int, Future[Reply]] = {}
        self._ids = itertools.count(1)
        self._staged: list[Staged] = []
        self._closed = False
        self._busy = 0  # jobs in flight and stagings under way: while above 0 the host is never stopped
        self._busy_lock = threading.Lock()  # the counter's own: a reply's thread updates it, never under ``_lock``
        self.last_used = time.monotonic()

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._worker.alive

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The running host's process (None when none runs)."""
        return self._worker.process

    @property
    def tier(self) -> str:
        return self._worker.tier

    @property
    def network(self) -> bool:
        return self._worker.network

    @property
    def notes(self) -> tuple[str, ...]:
        return (*self._worker.notes, *([self.start_note] if self.start_note else []))

    @property
    def starts(self) -> int:
        return self._worker.starts

    def start(self) -> None:
        with self._lock:
            if self._closed:
                raise ToolFailure(ErrorCode.EXECUTION_FAILED, "the app host of this run was closed")
            if self.alive:
                return
            self._spawn()

    def start_in_background(self) -> threading.Thread:
        """Start the host without waiting (a run calls this once Phase 1 is done: the host does not
        depend on the source, so the first scenario or validation finds it warm). A failure here is
        only logged; the next job starts the host again and reports it."""

        def go() -> None:
            try:
                self.start()
            except ToolFailure as exc:
                log.warning("app host did not start in the background: %s", exc.message)

        thread = threading.Thread(target=go, name="besser-apphost-prestart", daemon=True)
        thread.start()
        return thread

    def _plan(self) -> WorkerPlan:
        from kernel_ext.sandbox import Confinement, WorkerPlan, package_program

        overlay = list(self._paths)
        conf = Confinement.for_run(self.scratch / "rw", self.scratch / "home", network=False,
                                   readable=[self.scratch / "src", *overlay])
        options = [*([] if self.standby else ["--no-standby"]), *(arg for p in overlay for arg in ("--path", str(p)))]
        return WorkerPlan(package_program(PROGRAM, *options), conf)

    def _spawn(self) -> None:
        waiter: Future[Reply] = Future()
        try:
            self._worker.start(on_frame=lambda message: self._on_frame(waiter, message),
                               on_exit=lambda reason: self._on_exit(waiter, reason))
        except OSError as exc:
            raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE, f"could not start the app host: {exc.strerror}") from None
        try:
            self.ready = waiter.result(timeout=self.start_timeout)
        except Exception as exc:  # noqa: BLE001 - any start failure is the same refusal
            self._terminate()
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, f"the app host did not start: {exc}; {self.log_tail(600)}") from None

    def _on_frame(self, ready: Future[Reply], frame: JSONValue) -> None:
        """A frame from this start's host: its ready line, or a job's reply (``FrameError`` for
        anything else: the reader then stops this host, and the next job starts a fresh one)."""
        message = as_object(frame)
        if message.get("op") == "ready":
            if not ready.done():
                ready.set_result(message)
            return
        future = self._pending.pop(int(number(message.get("id") or 0)), None)
        if future is not None and not future.done():
            future.set_result(message)

    def _on_exit(self, ready: Future[Reply], reason: str) -> None:
        """This start's host ended: its start (if still awaited) and every outstanding job fail."""
        self.exit_reason = reason
        if not ready.done():
            ready.set_exception(RuntimeError(reason))
        for job_id in list(self._pending):
            future = self._pending.pop(job_id, None)
            if future is not None and not future.done():
                future.set_result({"op": "error", "code": "host_died", "message": reason, "id": job_id})

    def log_tail(self, chars: int = 2000) -> str:
        try:
            data = (self.scratch / "host.log").read_bytes()[-chars:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace").strip()

    def _terminate(self) -> None:
        self._worker.stop(grace=STOP_GRACE_S)

    @property
    def busy(self) -> int:
        """Jobs in flight plus stagings under way."""
        return self._busy

    def _use(self, delta: int) -> None:
        with self._busy_lock:
            self._busy += delta
            self.last_used = time.monotonic()

    def stop_if_idle(self, idle_s: float) -> bool:
        """Stop the host process (not the host: its next job starts it again) when nothing has used it
        for ``idle_s`` and no job is in flight; never waits behind a start or a staging. True if stopped."""
        if not self._lock.acquire(blocking=False):
            return False  # a start, a staging or a stop is under way: in use
        try:
            if self._closed or self._busy or not self.alive or time.monotonic() - self.last_used < idle_s:
                return False
            self._terminate()
            return True
        finally:
            self._lock.release()

    def close(self) -> None:
        """Stop the host and its children; remove the staged copies."""
        with self._lock:
            self._closed = True
            self._terminate()
            shutil.rmtree(self.scratch, ignore_errors=True)
            release_temp_home(self.scratch)

    # -- source -----------------------------------------------------------------------------------

    def stage(self, source: Source) -> Staged:
        """A read-only copy of ``source`` the children start from (reused while the digest holds),
        once its environment is settled. Refused once the host is closed (its folder is gone and
        must not be made again), and with ``requirements_unmet`` when the app's requirements
        cannot be provided."""
        if self._closed:
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, "the app host of this run was closed")
        self._use(+1)
        try:
            return self._stage(source)
        finally:
            self._use(-1)

    def _stage(self, source: Source) -> Staged:
        environment = environment_for(source.files.get("requirements.txt"), policy=self.policy, shell_tools=self.shell_tools)
        with self._lock:
            if self._closed:
                raise ToolFailure(ErrorCode.EXECUTION_FAILED, "the app host of this run was closed")
            self.environment = environment
            if environment.paths != self._paths:  # the next job starts a host with the app's packages
                self._paths = environment.paths
                self.start_note = ENV_RESTART_NOTE if environment.paths else ""
                self._terminate()
            for staged in self._staged:
                if staged.digest == source.digest:
                    return staged
            target = self.scratch / "src" / source.digest[:24]
            tmp = target.with_name(target.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            for rel, data in source.files.items():
                path = tmp / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            os.replace(tmp, target)
            staged = Staged(target, source.digest, source.backend.entry, source.backend.attr, environment)
            self._staged.append(staged)
            while len(self._staged) > KEEP_STAGED:
                old = self._staged.pop(0)
                shutil.rmtree(old.path, ignore_errors=True)
            return staged

    # -- jobs -------------------------------------------------------------------------------------

    def submit(self, staged: Staged, job: Mapping[str, object], timeout: float = JOB_TIMEOUT_S) -> PendingJob:
        """Send one job; the future's result is the host's reply frame (``op`` result or error).
        The job counts as in use from here until its future is settled (a reply, the host's exit)."""
        self._use(+1)
        future: Future[Reply] = Future()
        future.add_done_callback(lambda _done: self._use(-1))
        try:
            self.start()
        except BaseException:
            future.cancel()
            raise
        self.submitted += 1
        job_id = next(self._ids)
        self._pending[job_id] = future
        message = {"op": "run", "id": job_id, "src": str(staged.path), "entry": staged.entry, "attr": staged.attr,
                   "job": job, "timeout": timeout}
        try:
            self._worker.send(message)
        except OSError as exc:
            self._pending.pop(job_id, None)
            future.set_result({"op": "error", "code": "host_died", "message": f"the app host is gone: {exc}", "id": job_id})
        return PendingJob(future, timeout)

    def _first_job_done(self) -> None:
        """Run ``after_first_job`` once (in the waiting caller's thread, so it has run when ``wait`` returns)."""
        with self._busy_lock:
            hook, self.after_first_job = self.after_first_job, None
        if hook is not None:
            try:
                hook()
            except Exception:  # a hook's failure never fails the job it follows
                log.exception("the app host's after-first-job hook failed")

    def run(self, staged: Staged, job: Mapping[str, object], timeout: float = JOB_TIMEOUT_S) -> Reply:
        """Run one job and wait for its reply (the host enforces ``timeout``; a margin guards the host)."""
        return self.wait(self.submit(staged, job, timeout))

    def wait(self, pending: PendingJob) -> Reply:
        timeout = pending.timeout
        try:
            reply = pending.future.result(timeout=timeout + 15.0)
        except TimeoutError:
            log.error("app host did not answer within %.0f s; restarting it", timeout + 15.0)
            with self._lock:
                self._terminate()
            reply = {"op": "error", "code": "host_unresponsive", "message": "the app host stopped answering and was restarted"}
        if reply.get("code") == "host_died":
            with self._lock:
                if not self.alive:
                    self._terminate()
        self._first_job_done()
        return reply

    def drop_standby(self) -> None:
        """Forget the prepared child (the source changed): the host itself stays warm."""
        if self.alive:
            with contextlib.suppress(OSError):
                self._worker.send({"op": "drop_standby"})

    def describe(self) -> HostDescription:
        return {"tier": self.tier, "network": self.network, "notes": list(self.notes), "starts": self.starts,
                "preload_ms": self.ready.get("preload_ms"), "warm_ms": self.ready.get("warm_ms"),
                "environment": self.environment.describe() if self.environment is not None else None}

