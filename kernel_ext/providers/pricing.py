"""Cost from token usage and the bundled price table (``data/prices.json``).

The table ships with the package and is read the first time a price is asked for, never at
import and never from the network (tools that fetch a price map at import are why notebook
extensions start slowly or fail offline). A model without a known price costs "unknown"
(None), not zero: local and self-hosted models are free to run but we do not guess.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_ext.providers.events import Usage

__all__ = ["Price", "Pricing", "default_pricing"]

_PER = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens. Cache prices default to the input price when not listed."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
        ) / _PER


class Pricing:
    """A price table. ``models`` maps a model name (or family prefix) to its prices."""

    def __init__(self, models: Mapping[str, Mapping[str, Any]] | None = None, *, path: str | Path | None = None):
        self._models = dict(models) if models is not None else None
        self._path = Path(path) if path is not None else None
        self._prices: dict[str, Price] | None = None
        self._lock = threading.Lock()

    def _table(self) -> dict[str, Price]:
        with self._lock:
            if self._prices is None:
                raw = self._models if self._models is not None else _read(self._path)["models"]
                self._prices = {name.lower(): _price(name, row) for name, row in raw.items()}
            return self._prices

    def price(self, model: str) -> Price | None:
        """The price of ``model``: exact name, else the longest listed prefix at a word boundary."""
        table = self._table()
        name = model.strip().lower().rsplit("/", 1)[-1]
        for candidate in dict.fromkeys((name, name.replace(".", "-"))):
            if candidate in table:
                return table[candidate]
            for key in sorted(table, key=len, reverse=True):
                if candidate.startswith(key) and candidate[len(key)] in "-:@_":
                    return table[key]
        return None

    def cost(self, model: str, usage: Usage) -> float | None:
        price = self.price(model)
        return None if price is None else price.cost(usage)


def _read(path: Path | None) -> dict[str, Any]:
    if path is not None:
        return json.loads(path.read_text(encoding="utf-8"))
    from importlib.resources import files

    return json.loads(files("kernel_ext.providers").joinpath("data/prices.json").read_text(encoding="utf-8"))


def _price(name: str, row: Mapping[str, Any]) -> Price:
    try:
        return Price(
            float(row["input"]),
            float(row["output"]),
            None if row.get("cache_read") is None else float(row["cache_read"]),
            None if row.get("cache_write") is None else float(row["cache_write"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"price table row {name!r} is malformed: {exc}") from None


_default: Pricing | None = None


def default_pricing() -> Pricing:
    """The bundled table (one shared instance; read on first lookup)."""
    global _default
    if _default is None:
        _default = Pricing()
    return _default
