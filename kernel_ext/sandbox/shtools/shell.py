"""``Shell``: the shell tools as plain Python, for the agent's tools and a notebook cell alike.

    from kernel_ext.sandbox.shtools.shell import Shell
    with Shell("demo-project", enable=True) as sh:
        r = sh.run("pytest -q", expect={"exit": 0})
        server = sh.run("python -m http.server 8000 --bind 127.0.0.1", background=True)
        sh.logs(server["id"]); sh.kill(server["id"])
        sh.plan("git push --force"); sh.checkpoint("before"); sh.restore("before")

A ``Shell`` sits on the run's ``ShellService`` (the operator's gate, the tier, the run's workspace,
``$HOME`` and deadline) and adds the record store, background jobs and checkpoints. The tools
share one per service (``for_service``); closing the service (run end) or the shell stops every
background job. Refusals raise ``ToolFailure`` with a named code, as everywhere else.
"""

from __future__ import annotations

import atexit
import os
import secrets
import threading
import weakref
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox.record import new_record_id
from kernel_ext.sandbox.shares import MEMORY_LIMIT, STDERR_TAIL, MemoryWatch
from kernel_ext.sandbox.shtools import trace
from kernel_ext.sandbox.shtools.checkpoints import CheckpointStore
from kernel_ext.sandbox.shtools.effects import change_window
from kernel_ext.sandbox.shtools.jobs import (
    MEMORY_STORE_BYTES,
    STORE_BYTES,
    BackgroundJob,
    BackgroundJobs,
    Tap,
    background_captures,
    signal_name,
)
from kernel_ext.sandbox.shtools.options import ShRunRequest, parse_sh_request
from kernel_ext.sandbox.shtools.records import RecordStore, default_state_dir
from kernel_ext.sandbox.shtools.results import (
    Facts,
    build,
    check_expect,
    expected_exit,
    stored_meta,
)
from kernel_ext.sandbox.shtools.runner import (
    Placement,
    backoff,
    network_fields,
    place,
    resolve_inside,
    run_once,
    shell_argv,
    start,
)
from kernel_ext.sandbox.supervisor import Job
from kernel_ext.sandbox.tiers import Tier, TierChoice
from kernel_ext.shellplan.denylist import check_command
from kernel_ext.shellplan.plan import Plan, classify
from kernel_ext.shellplan.verdict import READ_ONLY
from kernel_ext.workspace import Workspace

if TYPE_CHECKING:  # built on demand: the session layer stays out of the toolkit's import
    from kernel_ext.sandbox.session.service import ShellService

_ATTACHED = "_besser_shell_tools"
_attach_lock = threading.Lock()


@dataclass(frozen=True)
class Prepared:
    """A run request checked against the gate, the policy and the tier; nothing has run yet."""

    request: ShRunRequest
    choice: TierChoice
    plan: Plan
    placement: Placement
    timeout_s: float


class Shell:
    """The shell tools of one workspace: ``run``, ``detail``, ``logs``, ``kill``, ``plan``, checkpoints.

    ``Shell(folder, enable=True)`` builds its own sandboxed service (the explicit argument is the
    operator's decision); ``Shell.for_service(service)`` shares a run's. Records and checkpoints
    live under ``state_dir`` (default: ``default_state_dir()``), namespaced by the workspace.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        *,
        service: ShellService | None = None,
        enable: bool | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        max_background: int | None = None,
        policy: str | None = None,
        network: bool | None = None,
        home: str | os.PathLike[str] | None = None,
    ):
        if service is None:
            if workspace is None:
                raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "Shell needs a workspace folder or a shell service")
            from kernel_ext.sandbox.config import shell_tools_enabled, startup_settings
            from kernel_ext.sandbox.session.service import ShellService

            settings = startup_settings()
            if network is not None:  # an explicit on keeps the operator's kind of network (private unless host)
                mode = "off" if not network else settings.network_mode if settings.session_network else "private"
                settings = replace(settings, session_network=bool(network), network_mode=mode)
            settings = replace(settings, policy=policy or settings.policy)
            service = ShellService(workspace, run_id=f"shell-{secrets.token_hex(3)}", enabled=shell_tools_enabled(enable),
                                   settings=settings, home=home)
            self._own_service = True
        else:
            self._own_service = False
        self.service = service
        self.workspace: Path = service.workspace
        if state_dir is None and service.records is not None and service.state_dir is not None:
            self.records = service.records  # the service's session commands are already kept there
            self.state_dir = service.state_dir
        else:
            self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.records = RecordStore(self.state_dir, self.workspace)
            if service.records is None:
                service.records, service.state_dir = self.records, self.state_dir
        self.checkpoint_store = CheckpointStore(self.state_dir, self.workspace)
        self.jobs = BackgroundJobs(max_background)
        self.closed = False
        atexit.register(_close_at_exit, weakref.ref(self))

    @classmethod
    def for_service(
        cls,
        service: ShellService,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        max_background: int | None = None,
    ) -> Shell:
        """The one ``Shell`` of a run's service; closing the service also stops its background jobs."""
        with _attach_lock:
            found = getattr(service, _ATTACHED, None)
            if found is not None and not found.closed:
                return found
            shell = cls(service=service, state_dir=state_dir, max_background=max_background)
            service.on_close(shell.close)
            setattr(service, _ATTACHED, shell)
            return shell

    # -- sh_run ---------------------------------------------------------------------------------

    def prepare(self, request: ShRunRequest) -> Prepared:
        """Every check that needs no execution: gate, policy, options, tier, paths, timeout."""
        choice = self.service.check_enabled()
        check_command(request.command, self.service.settings.allowed_programs)
        if not request.scrub_env:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT,
                              "scrub_env cannot be turned off: secrets never reach a command's environment here")
        if request.background:
            blocked = request.finish_options_given()
            if blocked:
                raise ToolFailure(
                    ErrorCode.BACKGROUND_INCOMPATIBLE,
                    f"{', '.join(blocked)} need the command to finish; a background command returns at once (poll it with "
                    "sh_logs)",
                )
        placement = place(self.service, choice, request.cwd, request.sandbox)
        if request.expect is not None:
            for path in (*_paths(request.expect.file_exists), *_paths(request.expect.file_absent)):
                resolve_inside(self.workspace, placement.conf.working_dir(), path, "expected path")
        timeout = self.service.timeout_for(request.timeout_s()) if not request.background else 0.0
        plan = classify(request.command, self.service.plan_context(placement.conf.working_dir()))
        return Prepared(request, choice, plan, placement, timeout)

    def run(self, command: str, **options: Any) -> dict[str, Any]:
        """Run ``command``; returns the quiet result (a failing command is a result, not an error)."""
        return self.execute(parse_sh_request(command, options))

    def execute(self, request: ShRunRequest) -> dict[str, Any]:
        prepared = self.prepare(request)
        if request.background:
            return self._start_background(prepared)
        return self._run_foreground(prepared)

    def _run_foreground(self, p: Prepared) -> dict[str, Any]:
        req = p.request
        record_id = new_record_id()
        strace = trace.strace_path() if req.trace else None
        measure = p.plan.category != READ_ONLY or (req.expect is not None and req.expect.changed is not None)
        attempts = []
        with change_window(self.workspace) if measure else nullcontext() as window:
            for number in range(1, req.retries + 2):
                timeout = p.timeout_s if number == 1 else self.service.timeout_for(req.timeout_s())
                attempt = run_once(p.choice, p.placement, req.command, timeout, strace)
                attempts.append(attempt)
                if number > req.retries or not _retryable(req, attempt):
                    break
                backoff(req.backoff_ms, number)
        last = attempts[-1]
        summary = None
        if last.trace is not None:
            summary = trace.summarize(last.trace.decode("utf-8", "replace"), self.workspace)
        facts = Facts(
            record_id, req, p.plan, p.placement, str(p.choice.tier), attempts,
            window.changes if window is not None else None, window.complete if window is not None else True,
            summary, "strace is not installed on this server" if req.trace and strace is None else None,
            bool(self.checkpoint_store.list()),
        )
        failed = None
        if req.expect is not None:
            failed = check_expect(req.expect, facts, self._exists_from(p.placement), self._relative_from(p.placement))
        result = build(facts, failed)
        self.records.save(
            stored_meta(facts, result),
            {"stdout": last.stdout, "stderr": last.stderr, **({"trace": last.trace} if last.trace is not None else {})},
            persist=not req.no_store,
        )
        return result

    def _start_background(self, p: Prepared) -> dict[str, Any]:
        req = p.request
        self.jobs.admit()
        record_id = new_record_id()
        persist = not req.no_store
        taps = []
        for name in ("stdout", "stderr"):
            handle = self.records.open_stream(record_id, name) if persist else None
            path = self.records.root / record_id / name if persist and self.records.root is not None else None
            taps.append(Tap(path, handle, STORE_BYTES if persist else MEMORY_STORE_BYTES))
        out, err = taps
        meta = {
            "id": record_id, "command": req.command, "cwd": p.placement.cwd, "background": True, "status": "running",
            "tier": str(p.choice.tier), "risk": p.plan.category, "plan": p.plan.as_dict(),
        }

        watches: list[MemoryWatch] = []

        def launch() -> Job:  # runs on the job's own thread; the record exists before the job can finish
            job, started = start(p.choice, p.placement.conf, shell_argv(req.command), *background_captures(out, err),
                                 stable=False, shared=p.placement.shared)
            watches.append(started.memory)
            meta["secrets_env_scrubbed"] = started.secrets_removed
            meta.update(network_fields(p.placement.conf, started.net_note))
            self.records.write_meta(meta, persist=persist)
            return job

        machinery = 2 if p.choice.tier is Tier.BWRAP else 1
        background = BackgroundJob(record_id, launch, out, err,
                                   lambda done: self._finish_background(done, meta, persist, watches), machinery)
        self.jobs.add(background)
        removed = meta["secrets_env_scrubbed"]
        result = {"id": record_id, "pid": background.pid, "status": "running", "background": True, "tier": str(p.choice.tier),
                  "sandboxed": p.choice.tier is not Tier.OFF, "risk": p.plan.category}
        result.update({k: meta[k] for k in ("network", "network_limits") if k in meta})  # as a foreground result says
        if removed:
            result["secrets_env_scrubbed"] = removed
        if req.no_store:
            result["stored"] = "memory-only"
        return result

    def _finish_background(self, job: BackgroundJob, meta: dict[str, Any], persist: bool, watches: list[MemoryWatch]) -> None:
        meta = {**meta, **job.state()}
        if watches:  # its sandbox's memory limit stopped it: named in the stored record
            tail = job.err.read(max(0, job.err.total - STDERR_TAIL), STDERR_TAIL)[0].decode(errors="replace")
            stopped = watches[0].note(0, job.exit_code, tail)
            if stopped:
                meta.update(stopped_by=MEMORY_LIMIT, memory_limit=stopped.partition(": ")[2])
        meta.update(stdout_bytes=job.out.total, stderr_bytes=job.err.total, stored_stdout_bytes=job.out.stored,
                    stored_stderr_bytes=job.err.stored)
        if persist:
            self.records.write_meta(meta)
        else:
            self.records.save(meta, {"stdout": job.out.memory, "stderr": job.err.memory}, persist=False)

    # -- sh_kill --------------------------------------------------------------------------------

    def kill(self, record_id: str, signal: str = "SIGTERM") -> dict[str, Any]:
        """Signal a background command's whole process tree; ``already_exited`` once it has ended."""
        name = signal_name(signal)
        job = self.jobs.get(record_id)
        if job is None:
            meta = self.records.meta(record_id)  # unknown ids are refused here
            return {"id": record_id, "status": "already_exited", "exit": meta.get("exit")}
        outcome = job.stop(name)
        return {"id": record_id, **outcome, "running_ms": round(job.running_ms())}

    # -- checkpoints ------------------------------------------------------------------------------

    def checkpoint(self, label: str, dir: str | None = None) -> dict[str, Any]:
        """Checkpoint ``dir``; the store reaches it through the fence (no-follow, from the workspace)."""
        meta = self.checkpoint_store.create(label, dir)
        self.service.note_checkpoint(meta["label"], "/".join(meta["origin_parts"]))  # sh_plan counts it as this run's
        return {"label": meta["label"], "dir": self._rel(Path(meta["origin"])), "files": meta["files"], "bytes": meta["bytes"],
                "method": meta["method"]}

    def restore(self, label: str, dir: str | None = None) -> dict[str, Any]:
        """Restore the checkpoint into its origin; with or without ``dir``, every component of the
        origin is reopened no-follow from the workspace at restore time (a link in the way is refused)."""
        outcome = self.checkpoint_store.restore(label, dir)
        outcome["dir"] = self._rel(Path(outcome["dir"]))
        return outcome

    def restore_preview(self, label: str, dir: str | None = None) -> dict[str, Any]:
        """What ``restore`` would do (files written, entries removed), counted but not done: for approval cards."""
        return self.checkpoint_store.preview(label, dir)

    def checkpoints(self, dir: str | None = None) -> list[dict[str, Any]]:
        """This project's checkpoints; with ``dir``, only those taken of that folder."""
        return [{**m, "origin": self._rel(Path(m["origin"]))} for m in self.checkpoint_store.list(dir)]

    # -- sh_plan, sh_detail, sh_logs ------------------------------------------------------------

    def plan(self, command: str) -> dict[str, Any]:
        if not isinstance(command, str) or not command.strip():
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "the command is empty")
        plan = classify(command, self.service.plan_context()).caveated(self.service.plan_caveat())
        return {"command": command, **plan.as_dict()}

    def detail(self, record_id: str, selector: str = "stdout", match: str | None = None, start_line: int = 1,
               max_lines: int = 400) -> dict[str, Any]:
        from kernel_ext.sandbox.shtools.views import detail

        return detail(self.jobs, self.records, record_id, selector, match, start_line, max_lines)

    def logs(self, record_id: str, stream: str = "both", stdout_cursor: int = 0, stderr_cursor: int = 0,
             full: bool = False) -> dict[str, Any]:
        from kernel_ext.sandbox.shtools.views import logs

        return logs(self.jobs, self.records, record_id, stream, stdout_cursor, stderr_cursor, full)

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every background job (and the service when this shell created it). Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.jobs.close()
        if self._own_service:
            self.service.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- paths ----------------------------------------------------------------------------------

    def _rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.workspace)) if path != self.workspace else "."
        except ValueError:
            return str(path)

    def _exists_from(self, placement: Placement) -> Callable[[str], bool]:
        """Existence through the fence's no-follow walk (a link in the way counts as absent)."""
        fence = Workspace(self.workspace, internal=())

        def exists(path: str) -> bool:
            try:
                return fence.lstat(os.path.normpath(os.path.join(placement.cwd, path))) is not None
            except ToolFailure:
                return False

        return exists

    def _relative_from(self, placement: Placement) -> Callable[[str], str]:
        return lambda path: os.path.normpath(os.path.join(placement.cwd, path))


def _paths(value: str | list[str] | None) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _retryable(request: ShRunRequest, attempt: Any) -> bool:
    if attempt.memory_note:  # the same command meets the same limit: no retry
        return False
    if attempt.timed_out:
        return True
    if attempt.exit_code == expected_exit(request):
        return False
    return request.retry_on_exit is None or attempt.exit_code in request.retry_on_exit


def _close_at_exit(ref: weakref.ref[Shell]) -> None:
    """At interpreter exit: close the toolkit if it is still alive (the weak reference keeps
    atexit from holding it)."""
    shell = ref()
    if shell is not None:
        shell.close()
