"""The run manager: owns runs as asyncio tasks, finds finished ones on disk, recovers, stops.

Jupyter-free, so the server extension and the magics' in-process mode host runs the same way.
Every run lives in ``<runs_dir>/<run-id>/`` and its events are appended to ``events.jsonl``
as they happen (``start_run`` does that), so a run survives the process that hosted it as a
replayable log. ``recover()`` (called once when the server starts) closes the logs of runs
that were in flight when a previous server died, with a ``done`` of status ``interrupted``.

At most ``operator.max_concurrent_runs`` runs execute at once; the others wait in the
admission queue (``admission.py``), visible and cancellable. A run leaves the live table when it
ends (its folder answers from then on; the loaded-log cache keeps the last few in memory).

A finished run's log can be tens of MB: the server reads it in a worker thread (``find``),
once per run and version of the file (concurrent requests share one load), and keeps the
last few loaded; listings go through the run index (``runindex.py``): the ends of each log, read
once per version of the file.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import os
from collections import OrderedDict
from pathlib import Path

from kernel_ext.hosting.admission import Admission
from kernel_ext.hosting.bodies import resolve_body
from kernel_ext.hosting.bus import EventLog
from kernel_ext.hosting.layout import RunLayout, run_folder
from kernel_ext.hosting.offloop import for_request, off_loop
from kernel_ext.hosting.options import OperatorSettings, RunRequest
from kernel_ext.hosting.requests import HostedRequest, capped, fingerprint
from kernel_ext.hosting.run import Run, RunBody, RunContext, load_finished, start_run
from kernel_ext.hosting.runindex import RunIndex
from kernel_ext.hosting.stored import log_stat, open_log
from kernel_ext.hosting.summaries import HOST_FILE, RunSummary, host_id, hosted_elsewhere, last_record, summarize
from kernel_ext.workspace.publish import sweep_temporaries

log = logging.getLogger(__name__)

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
        self.last_ended: Run | None = None  # the run that ended last here (what GET config's budget line reads)
        self._loaded: OrderedDict[str, tuple[tuple[int, int], Run]] = OrderedDict()  # id -> (file stamp, run)
        self._loading: dict[str, asyncio.Future[Run]] = {}
        self.admission = Admission(self.operator.max_concurrent_runs)
        self.index = RunIndex(self.runs_dir)  # what listings know of run folders, read once per log version

    # -- starting -------------------------------------------------------------------------

    def start(self, request: HostedRequest) -> Run:
        """Resolve the body first (a refusal leaves nothing on disk), then start it."""
        body = resolve_body(request, self.operator)
        return self.start_body(body, options=request)

    async def start_from_request(self, request: HostedRequest) -> Run:
        """``start`` for the server: resolving opens the files the request names (``hold_named_files``),
        so it runs on the request workers, never on the loop."""
        body = await for_request(resolve_body, request, self.operator)
        stamp = await for_request(fingerprint, request)  # a body can hold megabytes of model_json: off the loop
        run = self.start_body(body, options=request)
        run.context.fingerprint = stamp
        return run

    def start_body(self, body: RunBody, *, options: HostedRequest | None = None, run_id: str | None = None) -> Run:
        """Host an already-built body (library callers, benchmarks); needs a running loop. It waits in
        the admission queue while ``max_concurrent_runs`` others run."""
        layout = RunLayout.create(self.runs_dir, run_id)
        (layout.internal_dir / HOST_FILE).write_text(host_id(), encoding="utf-8")
        admission, asked, runtime = self.admission, _asked(options), runtime_budget(options, self.operator)

        async def admitted(context: RunContext) -> None:
            async with admission.slot(context.events, asked, lambda: context.cancelled_by):
                context.keep_runtime(runtime)  # from admission on: a card past it ends the run and frees the slot
                await body(context)

        run = start_run(
            admitted,
            layout,
            options=options,
            approval_timeout=self.approval_timeout,
            known_secrets=self.known_secrets,
        )
        self._live[run.id] = run
        assert run.task is not None
        run.task.add_done_callback(lambda _task: self._finished(run))
        return run

    def _finished(self, run: Run) -> None:
        """An ended run leaves the live table; it stays findable (its folder, and the cache of loaded
        logs while its file is unchanged)."""
        self._live.pop(run.id, None)
        self.last_ended = run
        try:
            self._remember(run.id, _stamp(run.context.layout.run_dir), run)
        except OSError:  # no log on disk (it could not be written): the folder answers, or nothing
            pass

    # -- finding --------------------------------------------------------------------------

    def live(self) -> list[Run]:
        return list(self._live.values())

    def get(self, run_id: str) -> Run | None:
        """A run hosted here, else one reloaded from its folder (replay only), else None.

        Synchronous, for callers off the server's loop (the magics); the server uses ``find``.
        """
        known, run_dir, stamp = self._known(run_id)
        if known is not None or run_dir is None or stamp is None:
            return known
        return self._remember(run_id, stamp, load_finished(run_dir))

    async def find(self, run_id: str) -> Run | None:
        """``get`` without blocking the loop: a log is loaded in a worker thread, once per
        version of its file; concurrent requests for the same run await the same load."""
        known, run_dir, stamp = self._known(run_id)
        if known is not None or run_dir is None or stamp is None:
            return known
        loading = self._loading.get(run_id)
        if loading is None:
            loading = asyncio.ensure_future(self._load(run_id, run_dir, stamp))
            self._loading[run_id] = loading
        return await asyncio.shield(loading)  # a client that goes away does not cancel the others' load

    def _known(self, run_id: str) -> tuple[Run | None, Path | None, tuple[int, int] | None]:
        """(the run, when live or loaded at its log's current version; else its folder and the
        log's stamp to load it by; all None when no such run exists)."""
        if run_id in self._live:
            return self._live[run_id], None, None
        run_dir = self._run_dir(run_id)
        if run_dir is None:
            return None, None, None
        stamp = _stamp(run_dir)
        return self._cached(run_id, stamp), run_dir, stamp

    async def _load(self, run_id: str, run_dir: Path, stamp: tuple[int, int]) -> Run:
        try:
            return self._remember(run_id, stamp, await off_loop(load_finished, run_dir))
        finally:
            self._loading.pop(run_id, None)

    def _cached(self, run_id: str, stamp: tuple[int, int]) -> Run | None:
        entry = self._loaded.get(run_id)
        if entry is None or entry[0] != stamp:
            return None
        self._loaded.move_to_end(run_id)
        return entry[1]

    def _remember(self, run_id: str, stamp: tuple[int, int], run: Run) -> Run:
        self._loaded[run_id] = (stamp, run)
        self._loaded.move_to_end(run_id)
        while len(self._loaded) > LOADED_RUNS_KEPT:
            self._loaded.popitem(last=False)
        return run

    def list(self) -> list[RunSummary]:
        """A summary of every run, hosted or on disk, oldest first (run ids start with the time)."""
        live = {run_id: summarize(run) for run_id, run in self._live.items()}
        return _sorted({**self._disk_summaries(set(live)), **live})

    async def summaries(self) -> builtins.list[RunSummary]:  # ``list`` is the method above
        """``list`` for the server: the folders are read in a worker thread."""
        live = {run_id: summarize(run) for run_id, run in self._live.items()}
        return _sorted({**await off_loop(self._disk_summaries, set(live)), **live})

    async def listing_json(self) -> str:
        """``summaries`` as ``GET runs`` sends them (``{"runs": [...]}``): the folders' JSON text from the
        index, on the log thread, and the runs hosted here (their live state) from the loop."""
        live = {run_id: json.dumps(summarize(run).as_json()) for run_id, run in self._live.items()}
        listed = {**await off_loop(self.index.fragments, set(live)), **live}
        return '{"runs": [' + ", ".join(listed[k] for k in sorted(listed)) + "]}"

    def _disk_summaries(self, skip: set[str]) -> dict[str, RunSummary]:
        return self.index.summaries(skip)

    def _run_dir(self, run_id: str) -> Path | None:
        return run_folder(self.runs_dir, run_id)

    # -- lifecycle ------------------------------------------------------------------------

    def recover(self) -> builtins.list[str]:
        """Close the log of every run left without ``done``: status ``interrupted``. Returns their ids."""
        recovered: builtins.list[str] = []
        if not self.runs_dir.is_dir():
            return recovered
        for entry in sorted(self.runs_dir.iterdir()):
            if entry.name in self._live or self._run_dir(entry.name) is None or hosted_elsewhere(entry):
                continue
            path = entry / "events.jsonl"
            if last_record(path).get("type") == "done":  # only an unfinished log is read whole
                continue
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
                run.cancel(by="server")
                tasks.append(run.task)
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)


LOADED_RUNS_KEPT = 8  # finished runs whose loaded logs the server keeps


def _asked(options: HostedRequest | None) -> str:
    """What a queued run shows it asked for (a scenario names itself)."""
    if isinstance(options, RunRequest):
        return options.request
    return f"scenario {getattr(options, 'scenario', '')}".strip() if options is not None else ""


def runtime_budget(options: HostedRequest | None, operator: OperatorSettings) -> float | None:
    """The run's runtime budget in seconds: its request's within the operator's cap (None: no bound)."""
    if isinstance(options, RunRequest):
        return capped(options, operator).max_runtime_s
    return operator.max_runtime_s


def _stamp(run_dir: Path) -> tuple[int, int]:
    info = log_stat(run_dir / "events.jsonl")
    return (info.st_size, info.st_mtime_ns) if info is not None else (-1, -1)


def _sorted(summaries: dict[str, RunSummary]) -> list[RunSummary]:
    return [summaries[k] for k in sorted(summaries)]


def _end_with_newline(path: Path) -> None:
    """A crash can leave a torn last line; the appended event must start on its own line."""
    with open_log(path, write=True) as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\n":
            handle.write(b"\n")
