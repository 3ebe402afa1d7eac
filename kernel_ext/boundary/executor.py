"""The host-owned boundary: validate -> policy -> prepare -> approve -> recheck -> execute.

The order is the guarantee, and each step has an observable consequence:

1. unknown or not-offered tools and malformed arguments are refused before anything else, and
   so are arguments holding a known secret of the run (whole or a piece, in a name or a value,
   spelled plainly or ``\\u``-escaped): the card would show ``[redacted]`` where the secret would
   be written, so nobody could see what they approve (``SECRET_IN_ARGUMENTS``);
2. arguments are deep-copied (frozen) before any callback, and execution uses the copy;
3. a policy denial returns an observation without asking the approver;
4. tool-specific preparation (path and exact-match checks) builds the proposal;
5. read-only calls run directly; others build a frozen ``ApprovalRequest`` and ask the
   host's approver, once per invocation;
6. files are rechecked after approval and again after the dispatch observer ran: any change
   is ``stale_input`` and nothing executes.

Host callbacks (approver, observer) are trusted code: their errors propagate and never grant.
One that raises ``ToolFailure`` (the loop's own recoverable type) is wrapped in
``RuntimeError`` so the loop cannot mistake a host failure for a tool observation.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from pydantic import ValidationError

from kernel_ext.boundary.approval import (
    ApprovalRequest,
    Approver,
    BoundaryEvent,
    Observer,
    always_deny,
    denial_words,
    freeze_arguments,
    thaw_arguments,
)
from kernel_ext.boundary.calls import CallIds, ToolCall, ToolResult
from kernel_ext.boundary.policy import ApprovalPolicy, ExecutionPolicy
from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.safejson import MAX_JSON_DEPTH, deeper_than
from kernel_ext.safetext import clip
from kernel_ext.secrets import FRAGMENT_CHARS, SecretMatcher, matcher, secret_values
from kernel_ext.tools.base import (
    Preparation,
    ToolArgs,
    ToolContext,
    ToolOutcome,
    ToolSpec,
    maybe_await,
)
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace.versions import FileSnapshot, snapshot

log = logging.getLogger(__name__)

MAX_ARGUMENT_BYTES = 2 * 1024 * 1024


class Executor:
    """Runs tool calls for one run, through the boundary, in the order above."""

    def __init__(
        self,
        catalog: ToolCatalog,
        context: ToolContext | None = None,
        *,
        policy: ExecutionPolicy | None = None,
        approvals: ApprovalPolicy | None = None,
        approver: Approver = always_deny,
        observer: Observer | None = None,
        offered: Iterable[str] | None = None,
        run_id: str = "",
        known_secrets: Iterable[str] | None = None,
    ):
        """``known_secrets``: the run's (``RunContext.known_secrets``); None means this process's
        secret-named environment values, so a bare Executor is never blind to them."""
        self.catalog = catalog
        self.context = context if context is not None else ToolContext()
        self.policy = policy if policy is not None else ExecutionPolicy()
        self.approvals = approvals if approvals is not None else ApprovalPolicy()
        self.approver = approver
        self.observer = observer
        scoped = catalog.scoped(self.context.available())
        names = set(scoped.names()) if offered is None else set(offered) & set(scoped.names())
        self.offered = ToolCatalog(spec for spec in catalog if spec.name in names)
        self.run_id = run_id  # bound into every approval request's digest
        self.call_ids = CallIds()  # the run's call identities: one Executor per run mints them all
        self.secrets: SecretMatcher = matcher(secret_values() if known_secrets is None else known_secrets)

    # -- public ---------------------------------------------------------------------------

    def execute_sync(self, call: ToolCall) -> ToolResult:
        """``execute`` for synchronous callers (scripts, the CLI); not inside a running loop."""
        return asyncio.run(self.execute(call))

    async def execute(self, call: ToolCall) -> ToolResult:
        """Validate, authorise, recheck, then execute one copied request."""
        try:
            spec, frozen = self._validate(call)
        except ToolFailure as exc:
            return self._failure(call.id, clip(str(call.name)), exc)  # an unknown name may be any size
        name, call_id = spec.name, call.id

        if not self.policy.permits(spec):
            return self._failure(call_id, name, ToolFailure(ErrorCode.POLICY_DENIED, self.policy.reason(spec)))

        try:
            preparation = await self._prepare(spec, frozen)
            files = tuple(self._snapshot(path) for path in preparation.files)
        except ToolFailure as exc:
            return self._failure(call_id, name, exc)

        if self.approvals.needs_approval(spec):
            request = ApprovalRequest(
                call_id, name, str(spec.category), frozen, files, preparation.proposal, freeze_arguments(preparation.data),
                run_id=self.run_id,
            )
            await self._notify(BoundaryEvent("approval_requested", call_id, name, request))
            decision = await _host_callback(self.approver, request)
            approved = decision is True
            await self._notify(BoundaryEvent("approval_resolved", call_id, name, request, approved))
            if not approved:
                by = getattr(self.approver, "decided_by", {}).get(call_id, "")  # an AsyncApprover knows who answered
                return self._failure(call_id, name, ToolFailure(ErrorCode.APPROVAL_DENIED, denial_words(name, by)))
            failure = self._recheck(files, "during approval")
            if failure is not None:
                return self._failure(call_id, name, failure)

        await self._notify(BoundaryEvent("dispatch", call_id, name))
        # The observer is external code too: recheck after its final invocation.
        failure = self._recheck(files, "while dispatch was reported")
        if failure is not None:
            return self._failure(call_id, name, failure)
        return await self._run(spec, call_id, frozen)

    # -- steps ----------------------------------------------------------------------------

    def _validate(self, call: ToolCall) -> tuple[ToolSpec, tuple[tuple[str, str], ...]]:
        spec = self.catalog.get(call.name) if isinstance(call.name, str) else None
        if spec is None:
            offered = ", ".join(self.offered.names()) or "none"
            raise ToolFailure(ErrorCode.UNKNOWN_TOOL, f"no tool named {clip(call.name)!r}; offered tools: {offered}")
        if spec.name not in self.offered:
            raise ToolFailure(
                ErrorCode.TOOL_NOT_OFFERED,
                f"{spec.name!r} is not offered in this run (its preconditions are absent: {', '.join(sorted(spec.requires)) or 'none'})",
            )
        if isinstance(call.arguments, str):
            _refuse_secrets(self.secrets, spec.name, [call.arguments])  # the text as sent
        parsed = _parse_arguments(call.arguments)
        _refuse_secrets(self.secrets, spec.name, _strings(parsed))  # and as read: \u-escapes decoded
        frozen = freeze_arguments(parsed)
        _build_args(spec, frozen)  # schema errors are reported before anything else happens
        return spec, frozen

    async def _prepare(self, spec: ToolSpec, frozen: tuple[tuple[str, str], ...]) -> Preparation:
        if spec.prepare is None:
            return Preparation()
        args = _build_args(spec, frozen)
        if spec.blocking:  # a card's checks are model-sized work (a command's policy and plan): off the loop
            made = await asyncio.to_thread(spec.prepare, args, self.context)
        else:
            made = spec.prepare(args, self.context)
        preparation = await maybe_await(made)
        if not isinstance(preparation, Preparation):
            raise TypeError(f"{spec.name}.prepare returned {type(preparation).__name__}, not Preparation")
        return preparation

    def _snapshot(self, path: str) -> FileSnapshot:
        workspace = self.context.workspace
        if workspace is None:
            raise ToolFailure(ErrorCode.INTERNAL_ERROR, "this run has no workspace to snapshot files in")
        return snapshot(workspace, path)

    def _recheck(self, files: tuple[FileSnapshot, ...], when: str) -> ToolFailure | None:
        for before in files:
            after = self._snapshot(before.path)
            if not before.same_version(after):
                return ToolFailure(
                    ErrorCode.STALE_INPUT,
                    f"{before.path!r} {before.describe_change(after)} {when}; nothing ran. Read it again and make a new request",
                )
        return None

    async def _run(self, spec: ToolSpec, call_id: str, frozen: tuple[tuple[str, str], ...]) -> ToolResult:
        try:
            args = _build_args(spec, frozen)
            if spec.blocking:
                outcome = await maybe_await(await asyncio.to_thread(spec.run, args, self.context))
            else:
                outcome = await maybe_await(spec.run(args, self.context))
        except ToolFailure as exc:
            return self._failure(call_id, spec.name, exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool bug: an observation, logged with its traceback
            log.exception("tool %s failed", spec.name)
            return self._failure(
                call_id, spec.name, ToolFailure(ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
            )
        if not isinstance(outcome, ToolOutcome):
            raise TypeError(f"{spec.name} returned {type(outcome).__name__}, not ToolOutcome")
        return ToolResult.success(call_id, spec.name, outcome.observation, outcome.data)

    async def _notify(self, event: BoundaryEvent) -> None:
        if self.observer is not None:
            await _host_callback(self.observer, event)

    @staticmethod
    def _failure(call_id: str, name: str, exc: ToolFailure) -> ToolResult:
        return ToolResult.failure(call_id, name, exc.code, exc.message, exc.data)


A = TypeVar("A")
R = TypeVar("R")


async def _host_callback(callback: Callable[[A], R | Awaitable[R]], argument: A) -> R:
    """Run trusted host code. Its errors propagate; a ``ToolFailure`` becomes ``RuntimeError``."""
    try:
        return await maybe_await(callback(argument))
    except ToolFailure as exc:
        raise RuntimeError(f"host callback raised ToolFailure ({exc.code}); refusing to treat it as a tool observation") from exc


_TOO_DEEP = f"arguments nest arrays or objects more than {MAX_JSON_DEPTH} levels deep; no tool accepts that"


def _parse_arguments(raw: object) -> dict[str, Any]:
    if isinstance(raw, str):
        if len(raw.encode("utf-8", "surrogatepass")) > MAX_ARGUMENT_BYTES:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"arguments exceed {MAX_ARGUMENT_BYTES} bytes")
        if not raw.strip():
            return {}
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ToolFailure(
                ErrorCode.INVALID_JSON, f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        except RecursionError:  # nesting thousands deep: past what the parser follows
            raise ToolFailure(ErrorCode.ARGUMENTS_TOO_DEEP, _TOO_DEEP) from None
        except ValueError as exc:  # a 5,000-digit integer
            raise ToolFailure(ErrorCode.INVALID_JSON, f"arguments are JSON no tool accepts: {str(exc)[:120]}") from None
    elif raw is None:
        parsed = {}
    else:
        parsed = raw
    if not isinstance(parsed, dict):
        raise ToolFailure(ErrorCode.INVALID_JSON, f"arguments must be a JSON object, got {type(parsed).__name__}")
    if deeper_than(parsed, MAX_JSON_DEPTH):  # no tool takes this; every walker after here would recurse as deep
        raise ToolFailure(ErrorCode.ARGUMENTS_TOO_DEEP, _TOO_DEEP)
    try:
        # A deep copy through JSON: the caller's dict is never used again.
        copied = json.loads(json.dumps(parsed))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"arguments are not JSON values: {str(exc)[:120]}") from None
    _refuse_unusable_text(copied)
    return copied


def _refuse_secrets(secrets: SecretMatcher, name: str, texts: list[str]) -> None:
    """Refuse, by name and without echoing it, a call that would carry a known secret anywhere."""
    if secrets and any(secrets.found(text) for text in texts if len(text) >= 4):
        raise ToolFailure(
            ErrorCode.SECRET_IN_ARGUMENTS,
            f"the arguments of {name!r} contain a credential of this run "
            f"(whole, {FRAGMENT_CHARS}+ characters of it, or an encoding of it); "
            "nothing was checked, shown for approval or run. Never write a credential into the app: "
            "read it from the environment at run time (os.environ)",
        )


def _strings(value: object) -> list[str]:
    """Every key and string value in parsed arguments, one per item (nothing joined across items)."""
    found: list[str] = []
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(str(key) for key in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            found.append(repr(item))
    return found


def _refuse_unusable_text(value: object, where: str = "arguments") -> None:
    """No tool can use a NUL or a lone surrogate: refused here once, for every tool.

    Both arrive easily in a provider's JSON (``\\u0000``, ``\\ud800``) and would otherwise reach
    the operating system as a path or a command and fail there unnamed.
    """
    if isinstance(value, str):
        if "\x00" in value:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"{where} contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"{where} contains a lone surrogate (not valid Unicode text)") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_unusable_text(key, where)
            _refuse_unusable_text(item, f"{where}.{key}" if where == "arguments" else where)
    elif isinstance(value, list):
        for item in value:
            _refuse_unusable_text(item, where)


def _build_args(spec: ToolSpec, frozen: tuple[tuple[str, str], ...]) -> ToolArgs:
    try:
        return spec.args_model.model_validate(thaw_arguments(frozen))
    except ValidationError as exc:
        raise _schema_failure(spec, exc) from None


def _schema_failure(spec: ToolSpec, exc: ValidationError) -> ToolFailure:
    missing, other = [], []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        if error["type"] == "missing":
            missing.append(where)
        elif error["type"] == "extra_forbidden":
            other.append(f"unknown argument {where!r}")
        else:
            other.append(f"{where!r}: {error['msg']}")
    if missing:
        fields = ", ".join(repr(m) for m in missing)
        return ToolFailure(ErrorCode.MISSING_ARGUMENT, f"{spec.name} needs {fields}" + (f"; also {'; '.join(other)}" if other else ""))
    return ToolFailure(ErrorCode.INVALID_ARGUMENT, f"{spec.name}: " + "; ".join(other))
