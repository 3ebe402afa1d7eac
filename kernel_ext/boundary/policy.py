"""Host-owned policies: what may run at all, and what needs a human first.

Both are independent of the catalog sent to the provider: hiding a tool from a model is a
convenience, refusing it here is the guarantee. Nothing a model says changes either policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from kernel_ext.tools.base import Category, ToolSpec


@dataclass(frozen=True)
class ExecutionPolicy:
    """An allowlist of categories and tool names; a denylist wins over both. Default: read-only."""

    allowed_categories: frozenset[str] = frozenset({Category.READ})
    allowed_tools: frozenset[str] = frozenset()
    denied_tools: frozenset[str] = frozenset()

    @classmethod
    def allowing(cls, categories: Iterable[str] = (), tools: Iterable[str] = (), deny: Iterable[str] = ()) -> ExecutionPolicy:
        return cls(frozenset(map(str, categories)) | {Category.READ}, frozenset(tools), frozenset(deny))

    def permits(self, spec: ToolSpec) -> bool:
        if spec.name in self.denied_tools:
            return False
        return spec.category in self.allowed_categories or spec.name in self.allowed_tools

    def reason(self, spec: ToolSpec) -> str:
        if spec.name in self.denied_tools:
            return f"{spec.name!r} is denied by the host policy"
        allowed = ", ".join(sorted(self.allowed_categories)) or "nothing"
        return f"{spec.name!r} is in category '{spec.category}' and the host policy allows only: {allowed}"


class Approval(StrEnum):
    NEVER = "never"        # runs without asking (the default for read and plan)
    PER_CALL = "per_call"  # every invocation asks the approver; nothing is remembered


_DEFAULT_APPROVALS: dict[str, Approval] = {
    Category.READ: Approval.NEVER,
    Category.PLAN: Approval.NEVER,
}


@dataclass(frozen=True)
class ApprovalPolicy:
    """Which categories need a human. Anything not listed needs one per call."""

    by_category: Mapping[str, Approval] = field(default_factory=lambda: dict(_DEFAULT_APPROVALS))

    @classmethod
    def without_approval_for(cls, *categories: str) -> ApprovalPolicy:
        merged = dict(_DEFAULT_APPROVALS)
        merged.update({str(c): Approval.NEVER for c in categories})
        return cls(merged)

    def needs_approval(self, spec: ToolSpec) -> bool:
        return self.by_category.get(spec.category, Approval.PER_CALL) is Approval.PER_CALL
