"""What a run request may ask for, and the run body that answers it.

Shared by the REST handler and the magics' in-process path, so both validate a body the same
way and start the same thing. Two kinds: ``scenario`` (chapter 5's calculator, hosted) and
``generate`` (the pipeline, imported lazily). Request fields can narrow what the operator
allows, never widen it: unknown fields are dropped and budgets are capped.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from kernel_ext.hosting.options import OperatorSettings, RunRequest, ScenarioRequest
from kernel_ext.hosting.run import RunBody

KINDS = ("generate", "scenario")


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


def parse_request(data: Any) -> RunRequest | ScenarioRequest:
    """A validated request from a JSON body; extra fields (``allow_shell_tools``...) are dropped."""
    if not isinstance(data, dict):
        raise RequestRefused("INVALID_REQUEST", "the body must be a JSON object")
    try:
        kind = _Kind.model_validate(data).kind
        model = ScenarioRequest if kind == "scenario" else RunRequest
        return model.model_validate({k: v for k, v in data.items() if k != "kind"})
    except ValidationError as exc:
        raise RequestRefused("INVALID_REQUEST", _describe(exc)) from None


def kind_of(request: RunRequest | ScenarioRequest) -> str:
    return "scenario" if isinstance(request, ScenarioRequest) else "generate"


def capped(request: RunRequest, operator: OperatorSettings) -> RunRequest:
    """The request with its budgets limited to the operator's caps (``operator.extra``)."""
    updates: dict[str, Any] = {}
    for name in ("max_turns", "max_cost_usd", "max_runtime_s"):
        cap = operator.extra.get(name)
        if cap is not None and getattr(request, name) > cap:
            updates[name] = type(getattr(request, name))(cap)
    return request.model_copy(update=updates) if updates else request


def resolve_body(request: RunRequest | ScenarioRequest, operator: OperatorSettings) -> RunBody:
    """The run body for ``request`` (budgets capped to the operator's)."""
    if isinstance(request, ScenarioRequest):
        from kernel_ext.scenarios.side_effects_run import side_effects_body

        return side_effects_body(allowed=tuple(request.allow))
    from kernel_ext.pipeline.generation import generation_body

    _confine_model_path(request, operator)
    return generation_body(capped(request, operator), operator)


def _confine_model_path(request: RunRequest, operator: OperatorSettings) -> None:
    """A ``model_path`` outside the operator's model root is refused before a run exists.

    The run then reads it through the fence (``model/loading.py``), so a link is refused there too.
    """
    path = request.model_path
    if operator.model_root is None or not path or path.startswith("example:"):
        return
    from kernel_ext.errors import ErrorCode, ToolFailure
    from kernel_ext.model.loading import locate_model_path

    try:
        locate_model_path(path, operator.model_root)
    except ToolFailure as exc:
        code = "MODEL_PATH_OUTSIDE_ROOT" if exc.code == ErrorCode.OUTSIDE_WORKSPACE else str(exc.code).upper()
        raise RequestRefused(code, exc.message) from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "body"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)
