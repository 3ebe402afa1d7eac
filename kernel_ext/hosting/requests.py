"""What a run request may ask for: one parser for the REST body, the magic and the in-process path.

The magic builds its request with ``parse_request`` and sends ``payload(request)``; the server
validates that body with the same ``parse_request``, so both ends agree on one model. Two kinds:
``scenario`` (chapter 5's calculator, hosted) and ``generate`` (the agent). Request fields can
narrow what the operator allows, never widen it: unknown fields are dropped and budgets are
capped to the operator's (``capped``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from kernel_ext.hosting.options import BUDGET_CAPS, OperatorSettings, RunRequest, ScenarioRequest

KINDS = ("generate", "scenario")

HostedRequest = RunRequest | ScenarioRequest


class RequestRefused(Exception):
    """A request that cannot start a run; ``code`` is stable, ``status`` the HTTP answer."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class _Kind(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: Literal["generate", "scenario"] = "generate"


def parse_request(data: Any) -> HostedRequest:
    """A validated request from a JSON body; extra fields (``allow_shell_tools``...) are dropped."""
    if not isinstance(data, dict):
        raise RequestRefused("INVALID_REQUEST", "the body must be a JSON object")
    try:
        kind = _Kind.model_validate(data).kind
        model = ScenarioRequest if kind == "scenario" else RunRequest
        return model.model_validate({k: v for k, v in data.items() if k != "kind"})
    except ValidationError as exc:
        raise RequestRefused("INVALID_REQUEST", _describe(exc)) from None


def payload(request: HostedRequest) -> dict[str, Any]:
    """The JSON body ``parse_request`` reads back as ``request``: its kind and the fields set."""
    return {"kind": kind_of(request), **request.model_dump(mode="json", exclude_unset=True)}


def fingerprint(request: HostedRequest) -> str:
    """sha256 of the request's JSON body: the same cell run twice asks for the same fingerprint."""
    text = json.dumps(payload(request), sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def kind_of(request: HostedRequest) -> str:
    return "scenario" if isinstance(request, ScenarioRequest) else "generate"


def capped(request: RunRequest, operator: OperatorSettings) -> RunRequest:
    """The request with its budgets limited to the operator's caps."""
    updates: dict[str, Any] = {}
    for name in BUDGET_CAPS:
        cap = getattr(operator, name)
        if cap is not None and getattr(request, name) > cap:
            updates[name] = type(getattr(request, name))(cap)
    return request.model_copy(update=updates) if updates else request


def hold_named_files(request: RunRequest, operator: OperatorSettings) -> None:
    """Every file the request names is refused here, before a run exists, unless the run could read
    it: a model file (``model_path``), a cassette or script (``provider``: ``replay:``/``scripted:``),
    held under the operator's root (``workspace/named.py``). Opened and stat'ed, never read or
    waited on (the run reads it, off the loop, through the same fence). A path outside the root is
    ``*_PATH_OUTSIDE_ROOT`` whether a file is there or not; a link, a FIFO, a device, a folder, a
    file over its bound are named by the fence (``SYMLINK_REFUSED``, ``NOT_REGULAR_FILE``,
    ``TOO_LARGE``, ``NOT_FOUND``). A ``base_run_id`` must be a run id (it names a folder)."""
    from kernel_ext.errors import ErrorCode, ToolFailure
    from kernel_ext.hosting.layout import RUN_ID_PATTERN
    from kernel_ext.model.loading import MAX_MODEL_FILE_BYTES
    from kernel_ext.model.loading import WHAT as MODEL_FILE
    from kernel_ext.providers.sources import MAX_SOURCE_BYTES, source_of
    from kernel_ext.workspace import named

    if request.base_run_id is not None and not RUN_ID_PATTERN.fullmatch(request.base_run_id):
        raise RequestRefused("INVALID_REQUEST", f"base_run_id {request.base_run_id[:80]!r} is not a run id")
    files: list[tuple[str, str, str | None, str, int]] = []  # (field, path, root, what, bound)
    if request.model_path and not request.model_path.startswith("example:"):
        files.append(("MODEL", request.model_path, operator.model_root, MODEL_FILE, MAX_MODEL_FILE_BYTES))
    source = source_of(request.provider, operator.model_root)
    if source is not None:
        files.append(("PROVIDER", source.path, source.root, source.what, MAX_SOURCE_BYTES))
    for field, path, root, what, bound in files:
        try:
            named.check(path, root, what=what, max_bytes=bound)
        except ToolFailure as exc:
            outside = exc.code == ErrorCode.OUTSIDE_WORKSPACE
            raise RequestRefused(f"{field}_PATH_OUTSIDE_ROOT" if outside else str(exc.code).upper(), exc.message) from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "body"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)
