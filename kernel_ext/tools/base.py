"""What a tool is: a name, a category, a pydantic arguments model, a description, a function.

The JSON schema a provider sees comes from the arguments model, so the contract the model is
told about and the one the host validates are the same object. Tools never decide policy:
they enforce resource access (through the workspace fence) and raise ``ToolFailure`` to refuse.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from kernel_ext.errors import ErrorCode, ToolFailure

if TYPE_CHECKING:
    from kernel_ext.shellplan.undo import PlanContext
    from kernel_ext.tools.services import ShellAccess
    from kernel_ext.workspace import Workspace

__all__ = [
    "Category",
    "Preparation",
    "RunState",
    "ToolArgs",
    "ToolContext",
    "ToolFailure",
    "ToolOutcome",
    "ToolSpec",
    "maybe_await",
    "shell_service",
]


T = TypeVar("T")


class Category(StrEnum):
    """Host metadata used by policies. Labelling a tool ``read`` is a promise its code keeps."""

    READ = "read"          # no side effect outside run state (file reads, model queries)
    PLAN = "plan"          # writes only to the run's own state (task list, evidence)
    EDIT = "edit"          # changes files in the workspace
    GENERATE = "generate"  # runs a deterministic generator into the workspace
    TEST = "test"          # executes project code (test_api, validate_app)
    SHELL = "shell"        # arbitrary commands in the sandbox


class ToolArgs(BaseModel):
    """Base for every arguments model: unknown fields are errors, instances are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returns when it succeeded: text for the model, structured data for the UI."""

    observation: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Preparation:
    """What a tool-specific preparation found before approval.

    ``files`` are workspace paths the call will touch or whose content the decision depends
    on: the boundary snapshots them into the approval request and rechecks them before
    execution. ``proposal`` is the human-readable description (a diff, a command plan).
    """

    files: tuple[str, ...] = ()
    proposal: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunState:
    """Per-run mutable state shared by tools (read ids, receipts, evidence), keyed by owner."""

    run_id: str = "local"
    stores: dict[str, Any] = field(default_factory=dict)

    def store(self, key: str, factory: Callable[[], T]) -> T:
        """The store named ``key``, created by ``factory`` on first use (one key, one type)."""
        if key not in self.stores:
            self.stores[key] = factory()
        found: T = self.stores[key]
        return found


@dataclass
class ToolContext:
    """Everything a tool may use, installed by the host for one run.

    ``services`` holds named resources later layers provide (``workspace``, ``domain_model``,
    ``shell``, ...). A tool's preconditions are service names: a tool whose services are
    absent is never offered. The shell service is only ever installed by operator
    configuration, never by anything a model says.
    """

    services: dict[str, Any] = field(default_factory=dict)
    state: RunState = field(default_factory=RunState)

    @property
    def workspace(self) -> Workspace | None:
        return self.services.get("workspace")

    def required_workspace(self) -> Workspace:
        """The run's workspace, or ``tool_not_offered`` by name (a tool's precondition)."""
        workspace: Workspace = self.service("workspace")
        return workspace

    @property
    def shell(self) -> ShellAccess | None:
        """The run's shell service, when the operator installed one (enabled or not)."""
        return self.services.get("shell")

    def service(self, name: str) -> Any:
        if name not in self.services:
            raise ToolFailure("tool_not_offered", f"this run has no {name!r}")
        return self.services[name]

    def available(self) -> frozenset[str]:
        return frozenset(name for name, value in self.services.items() if value is not None)


def plan_caveat(service: object) -> str:
    """Why a static rating cannot be trusted in the run's live shell ("" when it can, or the service
    has no session): ``ShellService.plan_caveat``, e.g. an earlier command changed PATH."""
    caveat = getattr(service, "plan_caveat", None)
    return str(caveat()) if callable(caveat) else ""


def plan_context(service: object, working_dir: str | None = None) -> PlanContext:
    """The run's checkpoints and the command's starting folder, for ``classify`` (``NO_CONTEXT`` when
    the service keeps none): a deletion a checkpoint of this run covers is rated reversible."""
    from kernel_ext.shellplan.undo import NO_CONTEXT

    context = getattr(service, "plan_context", None)
    return context(working_dir) if callable(context) else NO_CONTEXT


def shell_service(ctx: ToolContext) -> ShellAccess:
    """The run's ``shell`` service, for every shell tool; refused (``SHELL_DISABLED``) unless the
    operator enabled it: the gate is checked again at call time, not only when tools are offered."""
    service: ShellAccess = ctx.service("shell")
    if not getattr(service, "enabled", False):
        from kernel_ext.sandbox import DISABLED_MESSAGE

        raise ToolFailure(ErrorCode.SHELL_DISABLED, DISABLED_MESSAGE)
    return service


ArgsT = TypeVar("ArgsT", bound=ToolArgs)
RunFn = Callable[[ArgsT, ToolContext], "ToolOutcome | Awaitable[ToolOutcome]"]
PrepareFn = Callable[[ArgsT, ToolContext], "Preparation | Awaitable[Preparation]"]


@dataclass(frozen=True)
class ToolSpec(Generic[ArgsT]):
    """One declared tool. ``requires`` names the services that must be present to offer it.

    ``blocking`` marks a synchronous ``run`` that waits on something slow (a subprocess): the
    boundary runs it, and its ``prepare`` (a command's policy check and plan), in a worker
    thread so a server's event loop keeps serving.
    """

    name: str
    category: Category
    args_model: type[ArgsT]
    description: str
    run: RunFn[ArgsT]
    prepare: PrepareFn[ArgsT] | None = None
    requires: frozenset[str] = frozenset()
    blocking: bool = False

    def json_schema(self) -> dict[str, Any]:
        """The parameters schema sent to a provider (pydantic's, without its titles): built once
        per args model (pydantic takes milliseconds per model, and every provider turn of every run
        offers every tool, on the server's loop), then a fresh copy per call."""
        return json.loads(_schema_text(self.args_model))

    def provider_schema(self) -> dict[str, Any]:
        """Provider-neutral declaration: ``{name, description, parameters}``."""
        return {"name": self.name, "description": self.description, "parameters": self.json_schema()}

    def offered_in(self, available: Iterable[str]) -> bool:
        return self.requires <= frozenset(available)


@functools.cache
def _schema_text(args_model: type[ToolArgs]) -> str:
    return json.dumps(_strip_titles(args_model.model_json_schema()))


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            key: _strip_titles(value)
            for key, value in schema.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    return schema


async def maybe_await(value: T | Awaitable[T]) -> T:
    """Await ``value`` if it is awaitable: tools and callbacks may be sync or async."""
    if inspect.isawaitable(value):
        return await value
    return value
