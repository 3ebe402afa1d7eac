"""The run's cost meter: cumulative usage and cost, and the cap that stops further calls.

A call's cost is known only after its reply (usage arrives at the end of a stream), so the
cap is enforced before each request: once the spent amount reaches the cap, the next call
fails with ``COST_CAP`` instead of being sent. Tokens of models without a known price are
counted apart, so an unknown price never reads as "free".

The endpoint's figures are untrusted: a count that is negative, not a number (a string, a
bool, NaN, infinity), not whole, or beyond ``MAX_TOKENS_PER_CALL`` is refused by name
(``checked_usage``); the call is then counted as an estimate from the sizes sent and received
(``Provider.stream``), so totals never fall and a lying endpoint cannot switch the cap off.
Refusals wait in ``problems`` until the loop reports them as ``USAGE_REFUSED`` events.

Usage is always priced at the operator's configured model (``Provider.model``), never at the
name the endpoint puts in its stream: a stream naming an unpriced model would otherwise count
as unpriced and the cap would never fire. A different reported name is noted once
(``MODEL_MISMATCH``, in ``notices``). A cost cap over a configured model with no known price
cannot be kept: ``unpriced_cap`` names it, and ``check`` refuses the call (``COST_UNPRICED``).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping
from typing import Any

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.events import ProviderError, Usage
from kernel_ext.providers.pricing import Pricing, default_pricing

__all__ = ["MAX_TOKENS_PER_CALL", "CostMeter", "checked_usage", "read_count", "same_model", "unpriced_cap", "unpriced_verdict"]

MAX_TOKENS_PER_CALL = 10**9  # no model reads or writes a billion tokens in one call


def read_count(name: str, value: Any) -> tuple[int, str]:
    """A token count as reported: (the count, "") or (0, why it was refused). None counts as 0."""
    if value is None:
        return 0, ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value)[:40] if isinstance(value, str) else type(value).__name__
        return 0, f"{name} is not a number ({shown})"
    if isinstance(value, float) and not math.isfinite(value):
        return 0, f"{name} is not a finite number ({value})"
    if value < 0:
        return 0, f"{name} is negative"
    if value > MAX_TOKENS_PER_CALL:
        return 0, f"{name} is over {MAX_TOKENS_PER_CALL:,} tokens for one call"
    if isinstance(value, float) and not value.is_integer():
        return 0, f"{name} is not a whole number ({value})"
    return int(value), ""


def checked_usage(counts: Mapping[str, Any], names: Mapping[str, str] | None = None) -> tuple[Usage, tuple[str, ...]]:
    """A ``Usage`` from raw counts keyed by its field names; refused counts are 0 and named
    (by their wire name from ``names`` when given, e.g. ``prompt_tokens``)."""
    values: dict[str, int] = {}
    problems: list[str] = []
    for field in Usage().to_dict():
        count, problem = read_count((names or {}).get(field, field), counts.get(field))
        values[field] = count
        if problem:
            problems.append(problem)
    return Usage(**values), tuple(problems)


_SNAPSHOT = re.compile(r"([-@](\d{4}-?\d{2}-?\d{2}|\d{4}|latest|v\d+(:\d+)?)|:[\w.-]+)")


def same_model(reported: str, configured: str) -> bool:
    """True when ``reported`` is the configured model or a dated snapshot, ``-latest`` alias or
    ``:tag`` of it (``gpt-4o-2024-08-06`` for ``gpt-4o``; not ``gpt-4o-mini``)."""
    a = reported.strip().lower().rsplit("/", 1)[-1]
    b = configured.strip().lower().rsplit("/", 1)[-1]
    return a == b or (a.startswith(b) and _SNAPSHOT.fullmatch(a[len(b):]) is not None)


def unpriced_cap(model: str, cap_usd: float | None, pricing: Pricing | None = None) -> str | None:
    """Why a cost cap of ``cap_usd`` cannot be kept for ``model`` (no known price), or None."""
    if cap_usd is None or cap_usd <= 0:
        return None
    if pricing is None:
        pricing = default_pricing()
    if pricing.price(model) is not None:
        return None
    return (f"the configured model {model[:128]!r} has no known price, so a cost cap of ${cap_usd:.4f} cannot be kept; "
            "add its price to the price table (kernel_ext/providers/data/prices.json) or run it without a cost cap "
            "(the token and wall-time budgets still bound the run)")


def unpriced_verdict(model: str, meter: CostMeter, run_cap: float, run_cap_explicit: bool,
                     max_tokens: int) -> tuple[bool, str] | None:
    """What a run says when its live ``model`` has no known price: None (priced, or no cap),
    else (refused, why). An explicit cap (the caller's or the operator's ``max_cost_usd``, or the
    provider's ``BESSER_LLM_MAX_COST_USD``) is refused: the model is not called. Under only the
    default cap the run goes on, told that the cap cannot apply and what bounds it instead (a
    local model, free to run, keeps working without a flag; ``--max-cost 0`` says "no cap")."""
    explicit = unpriced_cap(model, meter.cap_usd, meter.pricing)
    if explicit is None and run_cap_explicit:
        explicit = unpriced_cap(model, run_cap, meter.pricing)
    if explicit is not None:
        return True, f"{explicit}; the model is not called in this run"
    if unpriced_cap(model, run_cap, meter.pricing) is None:
        return None
    return False, (f"the configured model {model[:128]!r} has no known price: the default cost cap (${run_cap:.2f}) "
                   f"cannot apply to it; the token budget ({max_tokens:,} tokens) and the wall-time budget bound the "
                   "run. An explicit cost cap with this model is refused.")


class CostMeter:
    def __init__(self, cap_usd: float | None = None, pricing: Pricing | None = None):
        if cap_usd is not None and cap_usd < 0:
            raise ValueError("a cost cap cannot be negative")
        self.cap_usd = cap_usd
        self._pricing = pricing
        self.usage = Usage()
        self.cost_usd = 0.0
        self.calls = 0
        self.unpriced_usage = Usage()
        self.unpriced_models: set[str] = set()
        self.problems: list[str] = []  # refused usage figures, until ``take_problems``
        self.notices: list[tuple[str, str]] = []  # (code, message), e.g. MODEL_MISMATCH, until ``take_notices``
        self._noted: set[str] = set()
        self._lock = threading.Lock()

    @property
    def pricing(self) -> Pricing:
        if self._pricing is None:
            self._pricing = default_pricing()
        return self._pricing

    def add(self, model: str, usage: Usage, problems: tuple[str, ...] = ()) -> tuple[float | None, float]:
        """Count one call's usage; returns (its cost or None when unpriced, the total so far).

        Every count is checked again here (any provider, any caller): totals only grow."""
        usage, refused = checked_usage(usage.to_dict())
        cost = self.pricing.cost(model, usage)
        if cost is not None and not (math.isfinite(cost) and cost >= 0):
            refused += (f"the price of {model!r} gives no usable cost",)
            cost = None
        with self._lock:
            self.problems.extend(problems + refused)
            self.calls += 1
            self.usage = self.usage + usage
            if cost is None:
                self.unpriced_usage = self.unpriced_usage + usage
                self.unpriced_models.add(model)
            else:
                self.cost_usd += cost
            return cost, self.cost_usd

    def note_reported_model(self, reported: str, configured: str) -> None:
        """The endpoint named another model: noted once per name (shown, never priced)."""
        if not reported or same_model(reported, configured):
            return
        with self._lock:
            if reported in self._noted or len(self._noted) >= 8:
                return
            self._noted.add(reported)
            message = (f"the endpoint reports model {reported[:128]!r}, not the configured {configured[:128]!r}; "
                       "usage is priced at the configured model")
            self.notices.append(("MODEL_MISMATCH", message))

    def take_notices(self) -> list[tuple[str, str]]:
        with self._lock:
            taken, self.notices = self.notices, []
        return taken

    def take_problems(self) -> list[str]:
        """The refused figures since the last call (each reported once)."""
        with self._lock:
            taken, self.problems = self.problems, []
        return taken

    @property
    def remaining_usd(self) -> float | None:
        return None if self.cap_usd is None else max(0.0, self.cap_usd - self.cost_usd)

    def check(self, model: str | None = None) -> None:
        """Refuse the next call when the cap is spent, or cannot be kept for ``model`` (no known price)."""
        if model is not None:
            why = unpriced_cap(model, self.cap_usd, self.pricing)
            if why is not None:
                raise ProviderError(ErrorCode.COST_UNPRICED, why, {"cap_usd": self.cap_usd})
        if self.cap_usd is not None and self.cost_usd >= self.cap_usd:
            raise ProviderError(
                ErrorCode.COST_CAP,
                f"the cost cap of ${self.cap_usd:.4f} is spent (${self.cost_usd:.4f} so far); no further calls",
                {"cap_usd": self.cap_usd, "spent_usd": self.cost_usd},
            )

    def snapshot(self) -> dict[str, Any]:
        """Totals for a ``cost`` event."""
        return {
            "calls": self.calls,
            "cost_usd": round(self.cost_usd, 6),
            "cap_usd": self.cap_usd,
            **self.usage.to_dict(),
            "unpriced_tokens": self.unpriced_usage.total_tokens,
            "unpriced_models": sorted(self.unpriced_models),
        }
