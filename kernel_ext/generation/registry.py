"""The registry of generation targets: which exist, which a run can offer, which to drop.

A target is offered only when every model kind it needs is present (and its executable, if
any, is on PATH); that one rule drives both the Phase 1 choice list and the ``generate_*``
tools of Phase 2. An explicitly chosen target is honoured as-is: no selection call, and a
named refusal (``generator_unavailable``) if its models are missing rather than a substitute.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.generation.stack_metadata import METADATA_TARGETS
from kernel_ext.generation.targets import BESSER_TARGETS, GeneratorSpec

ALL_TARGETS: tuple[GeneratorSpec, ...] = BESSER_TARGETS + METADATA_TARGETS
_BY_NAME = {spec.name: spec for spec in ALL_TARGETS}


def get_target(name: str) -> GeneratorSpec:
    """A target by name (``fastapi_backend``) or tool name (``generate_fastapi_backend``)."""
    key = name.strip()
    key = key[len("generate_"):] if key.startswith("generate_") else key
    spec = _BY_NAME.get(key)
    if spec is None:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"unknown generator {name!r}; known: {', '.join(_BY_NAME)}")
    return spec


def offered_targets(present: Iterable[str], *, kind: str | None = "besser") -> list[GeneratorSpec]:
    """Targets whose needs are met by the model kinds ``present`` (``{"domain", "gui"}``)."""
    have = frozenset(present)
    return [s for s in ALL_TARGETS if (kind is None or s.kind == kind) and s.unavailable_reason(have) is None]


def phase1_choices(present: Iterable[str]) -> list[str]:
    """Names a Phase 1 selector may choose from (BESSER generators only)."""
    return [s.name for s in offered_targets(present)]


def resolve_target(name: str, present: Iterable[str]) -> GeneratorSpec:
    """An explicitly chosen target, honoured as-is, or a named refusal."""
    spec = get_target(name)
    reason = spec.unavailable_reason(frozenset(present))
    if reason:
        raise ToolFailure(ErrorCode.GENERATOR_UNAVAILABLE, reason)
    return spec


def redundant_tools(primary: str | None) -> frozenset[str]:
    """``generate_*`` tools a Phase 2 should not offer once ``primary`` ran (it bundles them)."""
    if not primary:
        return frozenset()
    spec = get_target(primary)
    return frozenset(f"generate_{n}" for n in spec.bundles | {spec.name})
