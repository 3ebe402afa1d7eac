"""The run's cost meter: cumulative usage and cost, and the cap that stops further calls.

A call's cost is known only after its reply (usage arrives at the end of a stream), so the
cap is enforced before each request: once the spent amount reaches the cap, the next call
fails with ``COST_CAP`` instead of being sent. Tokens of models without a known price are
counted apart, so an unknown price never reads as "free".
"""

from __future__ import annotations

import threading
from typing import Any

from kernel_ext.providers.base import ErrorCode, ProviderError, Usage

__all__ = ["CostMeter"]


class CostMeter:
    def __init__(self, cap_usd: float | None = None, pricing: Any = None):
        if cap_usd is not None and cap_usd < 0:
            raise ValueError("a cost cap cannot be negative")
        self.cap_usd = cap_usd
        self._pricing = pricing
        self.usage = Usage()
        self.cost_usd = 0.0
        self.calls = 0
        self.unpriced_usage = Usage()
        self.unpriced_models: set[str] = set()
        self._lock = threading.Lock()

    @property
    def pricing(self) -> Any:
        if self._pricing is None:
            from kernel_ext.providers.pricing import default_pricing

            self._pricing = default_pricing()
        return self._pricing

    def add(self, model: str, usage: Usage) -> tuple[float | None, float]:
        """Count one call's usage; returns (its cost or None when unpriced, the total so far)."""
        cost = self.pricing.cost(model, usage)
        with self._lock:
            self.calls += 1
            self.usage = self.usage + usage
            if cost is None:
                self.unpriced_usage = self.unpriced_usage + usage
                self.unpriced_models.add(model)
            else:
                self.cost_usd += cost
            return cost, self.cost_usd

    @property
    def remaining_usd(self) -> float | None:
        return None if self.cap_usd is None else max(0.0, self.cap_usd - self.cost_usd)

    def check(self) -> None:
        """Refuse the next call when the cap is spent."""
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
