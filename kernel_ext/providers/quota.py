"""An endpoint saying the money is gone: a gateway's budget refusal or an account's spent quota.

A classroom runs the providers through a gateway that holds the real key and gives each student
a key of their own with a budget (docs/jupyterhub.md). Once that budget is spent, every further
request is refused the same way, so retrying is a storm that can never succeed: the transport
turns these replies into one final ``budget_exhausted`` error with the figures the endpoint gave.

Recognised by the error body's type, never by status alone (LiteLLM has answered 400, answers 422
since 1.8x and 429 when its operator asks; OpenAI answers 429, which is otherwise worth a retry):

- LiteLLM's proxy: ``{"error": {"type": "budget_exceeded", "message": "Budget has been exceeded!
  Key=... Current cost: 0.0123, Max budget: 0.01", ...}}`` (keys, teams, projects, tags), or
  ``"ExceededBudget: User=alice over budget. Spend=0.02, Budget=0.01"`` (users, end users);
- OpenAI (and servers copying it): ``{"error": {"type": "insufficient_quota", ...}}``: no figures.

The type is read from the body's head however long the body is (``errorhead.py``), so padding
after the error object or inside its message never hides a refusal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["BUDGET_TYPES", "budget_fields", "budget_figures"]

BUDGET_TYPES = frozenset({"budget_exceeded", "insufficient_quota"})

# "Current cost: 0.0123, Max budget: 0.01" or "Spend=0.0123, Budget=0.01" (LiteLLM's two wordings)
_FIGURES = re.compile(
    r"(?:current cost:\s*|spend\s*=\s*)(?P<spent>[0-9][0-9.eE+-]{0,30})\s*,\s*"
    r"(?:max budget:\s*|budget\s*=\s*)(?P<limit>[0-9][0-9.eE+-]{0,30})",
    re.IGNORECASE,
)


def budget_figures(kind: str, message: str) -> dict[str, Any] | None:
    """What a budget refusal of type ``kind`` says (``spent_usd`` / ``limit_usd`` when its
    message has them), or None when the reply is not a budget refusal."""
    if kind not in BUDGET_TYPES:
        return None
    found: dict[str, Any] = {"upstream_type": kind}
    match = _FIGURES.search(message[:2000])
    if match:
        spent, limit = _number(match["spent"]), _number(match["limit"])
        if spent is not None and limit is not None:
            found.update(spent_usd=spent, limit_usd=limit)
    return found


def budget_fields(data: Mapping[str, Any]) -> dict[str, float]:
    """The spent/limit figures an error's data carries, as an error event's optional fields."""
    return {name: float(data[name]) for name in ("spent_usd", "limit_usd")
            if isinstance(data.get(name), (int, float)) and not isinstance(data.get(name), bool)}


def _number(text: str) -> float | None:
    try:
        value = float(text.rstrip(".,"))
    except ValueError:
        return None
    return round(value, 6) if math.isfinite(value) and value >= 0 else None
