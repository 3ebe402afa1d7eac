"""The run manager: owns runs as asyncio tasks, finds finished ones on disk, recovers, stops.

Jupyter-free, so the server extension and the magics' in-process mode host runs the same way.
Every run lives in ``<runs_dir>/<run-id>/`` and its events are appended to ``events.jsonl``
as they happen (``start_run`` does that), so a run survives the process that hosted it as a
replayable log. ``recover()`` (called once when the server starts) closes the logs of runs
that were in flight when a previous server died, with a ``done`` of status ``interrupted``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from pathlib import Path
from typing import Any

from kernel_ext.pipeline.bus import EventLog
from kernel_ext.pipeline.layout import RUN_ID_PATTERN, RunLayout
from kernel_ext.pipeline.options import OperatorSettings, RunRequest, ScenarioRequest
from kernel_ext.pipeline.run import Run, RunBody, load_finished, start_run
from kernel_ext.server.kinds import kind_of, resolve_body
from kernel_ext.workspace.publish import sweep_temporaries

log = logging.getLogger(__name__)

HOST_FILE = "host"  # in .besser/: "<hostname> <pid>" of the process hosting the run
INTERRUPTED_SUMMARY = "the server stopped while this run was in flight; nothing is running for it any more"


class RunManager:
    """Starts, finds, lists, recovers and stops the runs kept under ``runs_dir``."""

    def __init__(
        self,
        runs_dir: Path,
        operator: OperatorSettings | None = None,
        *,
        approval_timeout: float | None = None,
        known_secrets: tuple[str, ...] = (),
    ):
        self.runs_dir = Path(runs_dir)
        self.operator = operator if operator is not None else OperatorSettings()
        self.approval_timeout = approval_timeout if approval_timeout is not None else self.operator.approval_timeout_s
        self.known_secrets = known_secrets
        self._live: dict[str, Run] = {}

    # -- starting -------------------------------------------------------------------------

    def start(self, request: RunRequest | ScenarioRequest) -> Run:
        """Resolve the body first (a refusal leaves nothing on disk), then start it."""
        body = resolve_body(request, self.operator)
        return self.start_body(body, options=request)

    def start_body(self, body: RunBody, *, options: Any = None, run_id: str | None = None) -> Run:
        """Host an already-built body (library callers, benchmarks); needs a running loop."""
        layout = RunLayout.create(self.runs_dir, run_id)
        (layout.internal_dir / HOST_FILE).write_text(_host_id(), encoding="utf-8")
        run = start_run(
            body,
            layout,
            options=options,
            approval_timeout=self.approval_timeout,
            known_secrets=self.known_secrets,
        )
        self._live[run.id] = run
        return run

    # -- finding --------------------------------------------------------------------------

    def live(self) -> list[Run]:
        return list(self._live.values())

    def get(self, run_id: str) -> Run | None:
        """A run hosted here, else one reloaded from its folder (replay only), else None."""
        if run_id in self._live:
            return self._live[run_id]
        run_dir = self._run_dir(run_id)
        if run_dir is None:
            return None
        return load_finished(run_dir)

    def list(self) -> list[dict[str, Any]]:
        """A summary of every run, hosted or on disk, oldest first (run ids start with the time)."""
        summaries = {run_id: summarize(run) for run_id, run in self._live.items()}
        if self.runs_dir.is_dir():
            for entry in self.runs_dir.iterdir():
                if entry.name not in summaries and self._run_dir(entry.name) is not None:
                    summary = _disk_summary(entry)
                    if summary is not None:
                        summaries[entry.name] = summary
        return [summaries[k] for k in sorted(summaries)]

    def _run_dir(self, run_id: str) -> Path | None:
        if not RUN_ID_PATTERN.match(run_id or ""):
            return None
        run_dir = self.runs_dir / run_id
        if run_dir.is_symlink() or not run_dir.is_dir() or not (run_dir / "events.jsonl").is_file():
            return None
        return run_dir

    # -- lifecycle ------------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Close the log of every run left without ``done``: status ``interrupted``. Returns their ids."""
        recovered = []
        if not self.runs_dir.is_dir():
            return recovered
        for entry in sorted(self.runs_dir.iterdir()):
            if entry.name in self._live or self._run_dir(entry.name) is None or hosted_elsewhere(entry):
                continue
            path = entry / "events.jsonl"
            events = EventLog.load(entry.name, path)
            if events.closed:
                continue
            _end_with_newline(path)
            if (entry / "app").is_dir():
                left = sweep_temporaries(entry / "app")  # half-written files of a publish the kill cut short
                if left:
                    log.info("run %s: removed %d temporaries of interrupted writes", entry.name, len(left))
            events.known_secrets = self.known_secrets
            events.emit("done", status="interrupted", summary=INTERRUPTED_SUMMARY)
            events.close_file()
            recovered.append(entry.name)
            log.info("run %s was in flight when the server stopped: marked interrupted", entry.name)
        return recovered

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Cancel every run still going (their sandboxes end with their tasks) and wait for them."""
        tasks = []
        for run in self._live.values():
            if run.task is not None and not run.task.done():
                if not run.events.closed:
                    run.events.emit("text", text="the Jupyter server is stopping; this run is cancelled")
                run.cancel()
                tasks.append(run.task)
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)


def summarize(run: Run) -> dict[str, Any]:
    """What a run list or ``GET runs/{id}`` shows: no arguments, no file contents."""
    events = run.events.events
    started = next((e for e in events if e.type == "run_started"), None)
    done = events[-1] if run.events.closed else None
    summary = {
        "id": run.id,
        "status": run.status,
        "live": run.task is not None and not run.task.done(),
        "request": getattr(started, "request", ""),
        "model_name": getattr(started, "model_name", ""),
        "provider_label": getattr(started, "provider_label", ""),
        "started_at": events[0].ts if events else None,
        "ended_at": done.ts if done is not None else None,
        "events": len(events),
        "pending_approvals": list(run.pending_approvals()),
        "summary": getattr(done, "summary", ""),
        "run_dir": str(run.context.layout.run_dir),
    }
    if isinstance(run.context.options, (RunRequest, ScenarioRequest)):
        summary["kind"] = kind_of(run.context.options)
    return summary


def _disk_summary(run_dir: Path) -> dict[str, Any] | None:
    """A summary from the first and last lines of ``events.jsonl`` (a listing reads no more)."""
    try:
        lines = [line for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
        first = json.loads(lines[0]) if lines else {}
        last = json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return None
    done = last if last.get("type") == "done" else None
    return {
        "id": run_dir.name,
        "status": done["status"] if done else ("running" if hosted_elsewhere(run_dir) else "interrupted"),
        "live": False,
        "request": first.get("request", ""),
        "model_name": first.get("model_name", ""),
        "provider_label": first.get("provider_label", ""),
        "started_at": first.get("ts"),
        "ended_at": done.get("ts") if done else None,
        "events": len(lines),
        "pending_approvals": [],
        "summary": done.get("summary", "") if done else "",
        "run_dir": str(run_dir),
    }


def _host_id() -> str:
    return f"{socket.gethostname()} {os.getpid()}"


def hosted_elsewhere(run_dir: Path) -> bool:
    """True while another live process on this machine hosts the run (a kernel's in-process run
    in the same folder, a second server): recovery must not close its log under it."""
    try:
        host, pid = (run_dir / ".besser" / HOST_FILE).read_text(encoding="utf-8").split()
        pid_number = int(pid)
    except (OSError, ValueError):
        return False
    if host != socket.gethostname() or pid_number == os.getpid():
        return False
    try:
        os.kill(pid_number, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _end_with_newline(path: Path) -> None:
    """A crash can leave a torn last line; the appended event must start on its own line."""
    with open(path, "rb+") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\n":
            handle.write(b"\n")
