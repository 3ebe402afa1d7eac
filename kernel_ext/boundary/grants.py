""""Approve the rest of this kind for this run": a person's grant, scoped and recorded.

A grant is made only by a person deciding a pending card (the card's button, a REST decision
with ``rest_of_kind``): it approves that card and every later request of the same tool
category in the same run. The model never reaches this: no tool holds the run's approver, and
the category comes from the frozen request the person saw, never from a caller. Shell commands
are never covered (their risk is per command): a grant on a shell card is refused by name, and
a shell request is asked for even when a grant for its category exists. Every covered decision
records the grant (``note``), so the log says which click approved which call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol


class ApprovalRequest(Protocol):
    """What a grant reads of a frozen request (``boundary.approval.ApprovalRequest``, which holds the grants)."""

    @property
    def call_id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def category(self) -> str: ...

# Tool categories a grant may cover. Shell (any command) and read/plan (never asked) are not here.
GRANTABLE = frozenset({"edit", "generate", "test"})
SHELL_TOOLS = frozenset({"run_command", "install_dependencies"})
# Cards of the host's own steps (not a model's tool call): what they show is no kind of call, so a
# grant is never made on one (the method-bodies card is category "generate" only for the policy)
# and none covers one.
HOST_STEP_CARDS = frozenset({"model_method_bodies"})


def is_shell(name: str, category: str) -> bool:
    """A shell call by category or by name (``sh_*``, ``run_command``...): never covered by a grant."""
    return category == "shell" or name.startswith("sh_") or name in SHELL_TOOLS


def refusal(name: str, category: str) -> str:
    """Why a grant cannot be made on a card of ``name`` / ``category`` ('' when it can)."""
    if is_shell(name, category):
        return f"{name!r} is a shell command: each one is approved on its own card"
    if name in HOST_STEP_CARDS:
        return f"the {name!r} card is the host's own step: it approves only itself"
    if category not in GRANTABLE:
        return f"the {category!r} category cannot be approved in advance"
    return ""


@dataclass(frozen=True)
class KindGrant:
    """One person's grant: the category, the card it was made on, who and when."""

    category: str
    call_id: str  # the card the person decided when making it
    by: str
    at: float = field(default_factory=time.time)

    @property
    def made_note(self) -> str:
        """What the card the grant was made on records: the decision covers the rest of its kind."""
        return f"approved, with the rest of the {self.category} calls of this run (a rest-of-kind grant)"

    @property
    def note(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.at))
        return f"approved by the rest-of-kind grant made at {when} (on card {self.call_id}, category {self.category})"


class KindGrants:
    """The grants of one run, one per category at most."""

    def __init__(self) -> None:
        self._by_category: dict[str, KindGrant] = {}

    def add(self, request: ApprovalRequest, by: str) -> KindGrant:
        """Record a grant of ``request``'s category; ValueError (with the reason) for a shell call."""
        reason = refusal(request.name, request.category)
        if reason:
            raise ValueError(reason)
        grant = self._by_category.get(request.category)
        if grant is None:
            grant = self._by_category[request.category] = KindGrant(request.category, request.call_id, by)
        return grant

    def covering(self, request: ApprovalRequest) -> KindGrant | None:
        """The grant that approves ``request`` without a card, if any (never a shell call)."""
        if is_shell(request.name, request.category) or request.name in HOST_STEP_CARDS:
            return None
        return self._by_category.get(request.category)

    def all(self) -> tuple[KindGrant, ...]:
        return tuple(self._by_category.values())
