"""Two ways to host a run from a kernel, one interface: the server extension, or in-process.

``ServerBackend`` starts runs over REST and follows them over SSE in a background task;
``LocalBackend`` hosts them in the kernel with the same ``RunManager`` the server uses (VS
Code, nbclient, plain IPython, or a server that does not answer). Either returns a
``RunView`` at once; the cell never waits for the run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from kernel_ext.hosting.manager import RunManager
from kernel_ext.hosting.options import OperatorSettings
from kernel_ext.hosting.requests import HostedRequest, RequestRefused, payload
from kernel_ext.hosting.run import Run
from kernel_ext.hosting.summaries import RunSummary
from kernel_ext.magics.client import (
    ServerClient,
    ServerError,
    ServerUnavailable,
    from_environment,
)
from kernel_ext.magics.loop import LoopRunner
from kernel_ext.secrets import secret_values
from kernel_ext.server.report import describe_configuration

if TYPE_CHECKING:  # ipywidgets loads with the first view
    from widgets.runview import RunView


class Backend(Protocol):
    """Where a run is hosted, as the magic uses it: both backends below answer the same calls."""

    mode: str

    @property
    def note(self) -> str: ...

    def config(self) -> dict[str, Any]: ...

    def runs(self) -> list[RunSummary]: ...

    def start(self, request: HostedRequest) -> RunView: ...

    def attach(self, run_id: str) -> RunView: ...

    def export(self, run_id: str) -> str: ...


class BackendError(Exception):
    """A short, actionable refusal for the magic to show (``code`` is stable)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class ServerBackend:
    mode = "server"

    def __init__(self, client: ServerClient, runner: LoopRunner):
        self.client = client
        self.runner = runner

    @property
    def note(self) -> str:
        # The path only: the address the kernel reaches the server at is its direct one (loopback on a
        # hub), which a person's browser cannot open; the path is the same behind any proxy.
        return f"hosted by the Jupyter server at {urlsplit(self.client.url).path or '/'}"

    def _call(self, method: str, path: str, body: Any = None, *, timeout: float | None = None) -> Any:
        from kernel_ext.hosting.layout import InvalidRunId, check_run_id

        try:
            if path.startswith("runs/"):  # a typed id goes into the URL only as one (a client would resolve `..`)
                check_run_id(path.split("/")[1])
        except InvalidRunId as exc:
            raise BackendError(InvalidRunId.code, str(exc)) from None
        try:
            return self.client.request(method, path, body, timeout=timeout)
        except ServerError as exc:
            raise BackendError(exc.code, exc.message) from None

    def config(self) -> dict[str, Any]:
        return self._call("GET", "config")

    def runs(self) -> list[RunSummary]:
        return [RunSummary.model_validate(run) for run in self._call("GET", "runs")["runs"]]

    def start(self, request: HostedRequest) -> RunView:
        """POST the request's JSON (``payload``): the server reads it back with the same model."""
        run = self._call("POST", "runs", payload(request))["run"]
        return self.attach(run["id"])

    def attach(self, run_id: str) -> RunView:
        from widgets.runview import RunView

        self._call("GET", f"runs/{run_id}")  # a named refusal (RUN_NOT_FOUND) before any view exists
        client, runner = self.client, self.runner

        def decide(call_id: str, approved: bool, digest: str | None = None, rest_of_kind: bool = False) -> object:
            return runner.spawn(client.decide(run_id, call_id, approved, digest, rest_of_kind=rest_of_kind))

        view = RunView(run_id=run_id, decide=decide, note=self.note)
        view.cancel_run = lambda: self._call("POST", f"runs/{run_id}/cancel", {})
        view.follower = runner.spawn(client.follow(run_id, view.apply, after=0, note=view.set_note))
        return view

    def export(self, run_id: str) -> str:
        """The finished run as notebook JSON text, built by the server (it holds the keys to cut)."""
        from kernel_ext.hosting.export import checked_text
        from kernel_ext.hosting.export.apart import EXPORT_TIMEOUT_S

        # a long run's export takes a while to build (the server ends it past this bound itself)
        return checked_text(self._call("GET", f"runs/{run_id}/export", timeout=EXPORT_TIMEOUT_S + 30))


class LocalBackend:
    mode = "in-process"

    def __init__(self, runner: LoopRunner, runs_dir: Path | None = None, environ: Mapping[str, str] | None = None):
        env = os.environ if environ is None else environ
        self.runner = runner
        self.manager = RunManager(
            Path(runs_dir) if runs_dir is not None else Path.cwd() / "besser_runs",
            OperatorSettings.from_environment(dict(env)),
            known_secrets=secret_values(env),
        )
        self.note = "in-process (no server extension): the run lives in this kernel"

    def config(self) -> dict[str, Any]:
        return describe_configuration(self.manager.operator, self.manager, mode=self.mode)

    def runs(self) -> list[RunSummary]:
        return self.manager.list()

    def start(self, request: HostedRequest) -> RunView:
        def begin() -> RunView:
            try:
                run = self.manager.start(request)
            except RequestRefused as exc:
                raise BackendError(exc.code, exc.message) from None
            return self._view(run)

        return self.runner.call(begin)

    def attach(self, run_id: str) -> RunView:
        run = self.manager.get(run_id)
        if run is None:
            raise BackendError("RUN_NOT_FOUND", f"no run {run_id!r} in {self.manager.runs_dir}")
        return self.runner.call(self._view, run)

    def export(self, run_id: str) -> str:
        """The finished run as notebook JSON text (``hosting/export``), this kernel's secrets cut."""
        from kernel_ext.hosting.export import notebook_text

        run = self.manager.get(run_id)
        if run is None:
            raise BackendError("RUN_NOT_FOUND", f"no run {run_id!r} in {self.manager.runs_dir}")
        return notebook_text(run.context.layout.run_dir, self.manager.known_secrets)

    def _view(self, run: Run) -> RunView:
        """Replay what happened so far, then listen (both on the run's loop: nothing is missed)."""
        from widgets.runview import RunView

        runner = self.runner

        def decide(call_id: str, approved: bool, digest: str | None = None, rest_of_kind: bool = False) -> object:
            return runner.soon(partial(run.decide, digest=digest, rest_of_kind=rest_of_kind), call_id, approved)

        view = RunView(run_id=run.id, decide=decide, note=self.note)
        view.cancel_run = lambda: runner.soon(partial(run.cancel, by="person"))
        view.replay(run.events.events)
        if run.task is not None and not run.task.done():
            run.events.add_listener(view.apply)
        view.run = run
        return view


def choose_backend(runner: LoopRunner, local: LocalBackend, environ: Mapping[str, str] | None = None) -> tuple[Backend, str]:
    """The server when its exported URL answers, else in-process; plus a line saying which and why."""
    client = from_environment(os.environ if environ is None else environ)
    if client is None:
        return local, ""
    try:
        client.probe()
    except ServerUnavailable as exc:
        return local, f"the server extension at {client.url} did not answer ({exc}); running in-process instead"
    return ServerBackend(client, runner), ""
