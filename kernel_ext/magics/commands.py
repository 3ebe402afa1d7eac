"""``%besser generate|scenario|runs|attach|config|show|export`` and ``%%test_api``.

Commands return a display object at once (a ``RunView`` for runs); following a run happens in
a background task. Mistakes answer one actionable line (``UsageError``): an unknown model
variable, a run that does not exist, a pipeline that is not installed. Only ``argparse``,
``shlex`` and IPython are imported here; everything else when a command needs it.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

if TYPE_CHECKING:  # each loads with the first command that needs it
    from besser.BUML.metamodel.structural import DomainModel
    from IPython.core.interactiveshell import InteractiveShell

    from kernel_ext.hosting.requests import HostedRequest
    from kernel_ext.magics.backends import Backend, LocalBackend
    from kernel_ext.magics.display import ConfigView, Notice, RunsTable
    from kernel_ext.magics.loop import LoopRunner
    from kernel_ext.model.diagram import ClassDiagram
    from widgets.report import RequestReport
    from widgets.runview import RunView

APPROVE_MODES = ("none", "edits", "shell", "all")


class _HelpShown(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (try `{self.prog} -h`)")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if status:
            raise UsageError(message or f"{self.prog}: invalid arguments")
        raise _HelpShown()


def build_parser() -> _Parser:
    parser = _Parser(prog="%besser", description="Start, follow and inspect besser-jupyter-agent runs.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    generate = commands.add_parser("generate", help="generate an app from a DomainModel and a request")
    generate.add_argument("model", help="a DomainModel variable, a model file, or example:NAME")
    generate.add_argument("request", nargs="+", help="what to build, in words")
    generate.add_argument("--target", help="an explicit generator (saves the select call)")
    generate.add_argument("--provider", help="none | replay:CASSETTE | scripted:NAME | openai | anthropic")
    generate.add_argument("--llm-model", help="the LLM model name")
    generate.add_argument("--approve", choices=APPROVE_MODES, default="none", help="categories approved without a card")
    generate.add_argument("--max-turns", type=int)
    generate.add_argument("--max-cost", type=float, help="USD")
    generate.add_argument("--max-runtime", type=float, help="seconds")
    generate.add_argument("--base-run", help="continue an earlier run's workspace")
    from kernel_ext.hosting.flags import add_switch_flags  # the parser is built on the first %besser, not at load

    add_switch_flags(generate)
    scenario = commands.add_parser("scenario", help="host an authored teaching scenario")
    scenario.add_argument("name", choices=["side-effects"])
    scenario.add_argument("--allow", default="edit,test", help="categories the policy allows besides read (comma-separated)")
    for starting in (generate, scenario):
        starting.add_argument("--new", action="store_true", help="start a new run even if one of this request still waits")
    commands.add_parser("runs", help="list runs")
    attach = commands.add_parser("attach", help="re-attach to a run (replays its events)")
    attach.add_argument("run_id")
    commands.add_parser("config", help="what the backend allows and has")
    show = commands.add_parser("show", help="draw a model's class diagram")
    show.add_argument("model")
    export = commands.add_parser("export", help="write a finished run as a notebook that re-runs it offline")
    export.add_argument("run_id")
    export.add_argument("--to", help="the notebook file, or a folder (default: RUN_ID.ipynb in this folder)")
    export.add_argument("--force", action="store_true", help="replace an existing file")
    return parser


def _test_api_parser() -> _Parser:
    parser = _Parser(prog="%%test_api", description="Run the cell's requests against a run's generated app.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--run", dest="run_id", help="a run id (default: the latest run)")
    where.add_argument("--app", help="a folder holding a generated app")
    return parser


@magics_class
class BesserMagics(Magics):
    def __init__(self, shell: InteractiveShell | None = None):
        super().__init__(shell)
        self._runner: LoopRunner | None = None
        self._local: LocalBackend | None = None
        self.views: dict[str, RunView] = {}  # the latest view per run id, kept so followers stay referenced

    # -- entry points ---------------------------------------------------------------------

    @line_magic
    def besser(self, line: str) -> object:
        """What the command shows (a run's view, a table, a diagram), or None after help."""
        try:
            args = build_parser().parse_args(_split(line))
        except _HelpShown:
            return None
        _check_run_ids(args)
        from kernel_ext.hosting.options import ConfigurationError
        from kernel_ext.magics.backends import BackendError

        try:
            command: Callable[[argparse.Namespace], object] = getattr(self, f"_{args.command}")
            return command(args)
        except BackendError as exc:
            raise UsageError(f"{exc.code}: {exc}") from None
        except ConfigurationError as exc:  # the operator's environment (in-process runs read it here)
            raise UsageError(f"configuration: {exc}") from None

    @cell_magic
    def test_api(self, line: str, cell: str) -> RequestReport | None:
        from kernel_ext.magics import apitest

        try:
            args = _test_api_parser().parse_args(_split(line))
        except _HelpShown:
            return None
        _check_run_ids(args)
        try:
            scenario = apitest.parse_cell(cell)
            return apitest.run_cell(self._app_dir(args), scenario)
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    # -- commands -------------------------------------------------------------------------

    def _generate(self, args: argparse.Namespace) -> RunView:
        from kernel_ext.hosting.flags import switches_from

        fields: dict[str, Any] = {"kind": "generate", "request": " ".join(args.request), **self._model_source(args.model)}
        options = {"target": args.target, "provider": _provider_spec(args.provider), "llm_model": args.llm_model, "approve": args.approve,
                   "max_turns": args.max_turns, "max_cost_usd": args.max_cost, "max_runtime_s": args.max_runtime,
                   "base_run_id": args.base_run, **switches_from(args)}
        fields.update({k: v for k, v in options.items() if v is not None})
        return self._start(_request(fields), new=args.new)

    def _scenario(self, args: argparse.Namespace) -> RunView:
        allow = [part.strip() for part in args.allow.split(",") if part.strip()]
        return self._start(_request({"kind": "scenario", "scenario": args.name, "allow": allow}), new=args.new)

    def _runs(self, args: argparse.Namespace) -> RunsTable:
        from kernel_ext.magics.display import RunsTable

        backend, note = self._backend()
        return RunsTable(backend.runs(), note or f"runs ({backend.mode})")

    def _attach(self, args: argparse.Namespace) -> RunView:
        backend, note = self._backend()
        view = backend.attach(args.run_id)
        return self._keep(view, note)

    def _config(self, args: argparse.Namespace) -> ConfigView:
        from kernel_ext.magics.display import ConfigView

        backend, note = self._backend()
        return ConfigView(backend.config(), note or f"mode: {backend.mode}")

    def _show(self, args: argparse.Namespace) -> ClassDiagram:
        from kernel_ext.model.diagram import show

        return show(self._load_model(args.model))

    def _export(self, args: argparse.Namespace) -> Notice:
        from kernel_ext.hosting.export import ExportRefused, target_path, write_notebook
        from kernel_ext.magics.display import Notice
        from kernel_ext.safetext import shown_line

        backend, note = self._backend()
        try:
            target = target_path(args.run_id, args.to, force=args.force)  # refused before the run is read
            write_notebook(target, backend.export(args.run_id), force=args.force)
        except ExportRefused as exc:
            raise UsageError(f"{exc.code}: {exc.message}") from None
        return Notice(f"run {args.run_id} exported to {shown_line(str(target))}: open it to read the run; its last cells "
                      "re-run it offline with the replay provider" + (f" ({note})" if note else ""))

    # -- helpers --------------------------------------------------------------------------

    def _backend(self) -> tuple[Backend, str]:
        from kernel_ext.magics.backends import choose_backend

        return choose_backend(self._loop(), self._in_process())

    def _loop(self) -> LoopRunner:
        from kernel_ext.magics.loop import LoopRunner

        if self._runner is None:
            self._runner = LoopRunner()
        return self._runner

    def _in_process(self) -> LocalBackend:
        from kernel_ext.magics.backends import LocalBackend

        if self._local is None:
            self._local = LocalBackend(self._loop())
        return self._local

    def _start(self, request: HostedRequest, *, new: bool = False) -> RunView:
        import httpx

        from kernel_ext.magics.reattach import twin_note, waiting_twin

        backend, note = self._backend()
        twin = None if new else waiting_twin(backend, request)
        if twin is not None:
            return self._keep(backend.attach(twin.id), twin_note(twin))
        try:
            view = backend.start(request)
        except httpx.TransportError as exc:  # answered the probe, then went away
            note = f"the server extension stopped answering ({type(exc).__name__}); running in-process instead"
            view = self._in_process().start(request)
        return self._keep(view, note)

    def _keep(self, view: RunView, note: str) -> RunView:
        if note:
            view.set_note(f"{note} · {view.note}")
        if view.state.run_id:
            self.views[view.state.run_id] = view
        return view

    def _model_source(self, name: str) -> dict[str, Any]:
        """A DomainModel from the namespace goes as JSON; a path or example:NAME goes as a source."""
        namespace = self.shell.user_ns if self.shell is not None else {}
        if name in namespace:
            from kernel_ext.model.jsonform import model_to_dict

            return {"model_json": model_to_dict(self._load_model(name))}
        if name.startswith("example:"):
            return {"model_path": name}
        path = Path(name).expanduser()
        if path.is_file():
            return {"model_path": str(path.resolve())}
        raise UsageError(_unknown_model(name))

    def _load_model(self, name: str) -> DomainModel:
        from kernel_ext.errors import ToolFailure
        from kernel_ext.model.loading import load_model

        namespace = self.shell.user_ns if self.shell is not None else {}
        if name not in namespace and not name.startswith("example:") and not Path(name).expanduser().is_file():
            raise UsageError(_unknown_model(name))
        source = namespace.get(name, name)
        try:
            return load_model(source)
        except ToolFailure as exc:
            kind = type(source).__name__
            raise UsageError(f"{name!r} ({kind}) is not a usable B-UML model: {exc.message}") from None

    def _app_dir(self, args: argparse.Namespace) -> Path:
        if args.app:
            path = Path(args.app).expanduser()
            if not path.is_dir():
                raise UsageError(f"--app {args.app}: no such folder")
            return path
        backend, _ = self._backend()
        runs = backend.runs()
        chosen = next((r for r in runs if r.id == args.run_id), None) if args.run_id else (runs[-1] if runs else None)
        if chosen is None:
            raise UsageError(f"no run {args.run_id!r}; `%besser runs` lists them" if args.run_id else "no runs yet: pass --app DIR")
        return Path(chosen.run_dir) / "app"


def _request(fields: dict[str, Any]) -> HostedRequest:
    """The hosting request model the server validates (its JSON is what a POST sends)."""
    from kernel_ext.hosting.requests import RequestRefused, parse_request

    try:
        return parse_request(fields)
    except RequestRefused as exc:
        raise UsageError(f"{exc.code}: {exc.message}") from None


def _check_run_ids(args: argparse.Namespace) -> None:
    """Every run id typed into a command (``attach``, ``export``, ``--base-run``, ``--run``) is shaped
    like one before it reaches a path or a URL (``../x`` would lead out of the run store)."""
    from kernel_ext.hosting.layout import InvalidRunId, check_run_id

    for name in ("run_id", "base_run"):
        value = getattr(args, name, None)
        if value is not None:
            try:
                check_run_id(value)
            except InvalidRunId as exc:
                raise UsageError(f"{InvalidRunId.code}: {exc}") from None


def _provider_spec(spec: str | None) -> str | None:
    """A cassette or script named by a path goes as an absolute one, like a model file: it means
    this kernel's folder, wherever the server that hosts the run has its root (which holds it)."""
    from kernel_ext.providers.sources import source_of

    source = source_of(spec, None)
    if source is None or source.root is not None:  # no file, or a shipped cassette by name
        return spec
    return f"{source.kind}:{Path(source.path).expanduser().absolute()}"


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"could not read the arguments: {exc}") from None


def _unknown_model(name: str) -> str:
    return (
        f"unknown model {name!r}: define a DomainModel named {name} in this notebook, "
        "give the path of a model file, or use example:library"
    )
