"""What evaluating one Python model file may cost, counted as it is spent (``safe_python``'s bounds).

Each bound exceeded is a named ``too_large`` with the line: expressions evaluated, B-UML calls,
CPU time (BESSER's own ``add_*`` calls grow quadratically), the expanded weight of collections
(``t = (t, t)`` repeated would cost exponential time to hash), and the bytes of every value
built, summed over the whole file (each string under its cap, thousands of ``b = a + "1"``
would still hold gigabytes).
"""

from __future__ import annotations

import ast
import sys
import time
from typing import Any, NoReturn

from kernel_ext.errors import ErrorCode, ToolFailure

MAX_STEPS = 400_000        # expressions evaluated
MAX_CALLS = 20_000         # B-UML constructor and method calls
MAX_STRING_CHARS = 256 * 1024  # a string the evaluator builds with '+'
MAX_VALUE_WEIGHT = 100_000     # elements in a collection, counting nested collections in full
MAX_CPU_SECONDS = 5.0          # this thread's CPU time
MAX_BUILT_BYTES = 64 * 1024 * 1024  # bytes of all values built (strings, collections, call results), summed


class EvalBudget:
    """The counters of one file's evaluation; ``line`` is the statement being evaluated."""

    def __init__(self, source: str):
        self.source = source
        self.line = 0
        self.steps = 0
        self.calls = 0
        self.cpu_deadline = time.thread_time() + MAX_CPU_SECONDS
        self.weights: dict[int, tuple[Any, int]] = {}  # id -> (the collection, kept alive; its weight)
        self.built = 0  # bytes of every value built so far (never decreases: an upper bound on what is held)

    def step(self, node: ast.AST) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            self.too_large(node, f"more than {MAX_STEPS} expressions to evaluate")
        if self.steps % 64 == 0 and time.thread_time() > self.cpu_deadline:
            self.too_large(node, f"more than {MAX_CPU_SECONDS:g} s of CPU time to evaluate")

    def call(self, node: ast.AST) -> None:
        self.calls += 1
        if self.calls > MAX_CALLS:
            self.too_large(node, f"more than {MAX_CALLS} calls")

    def joined(self, node: ast.AST, left: str, right: str) -> str:
        if len(left) + len(right) > MAX_STRING_CHARS:
            self.too_large(node, f"a string longer than {MAX_STRING_CHARS} characters")
        return self.charged(node, left + right)  # one string is at most 1 MiB; the sum is what grows

    def weight(self, value: Any) -> int:
        if isinstance(value, str):
            return 1 + len(value) // 64
        known = self.weights.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        if isinstance(value, (list, tuple, set, frozenset, dict)):
            return 1 + len(value)  # a B-UML object's own collection: its members weigh one each
        return 1

    def weigh(self, node: ast.AST, items: list[Any]) -> int:
        weight = 1 + sum(self.weight(item) for item in items)
        if weight > MAX_VALUE_WEIGHT:
            self.too_large(node, f"a collection of more than {MAX_VALUE_WEIGHT} elements (nested ones counted in full)")
        return weight

    def weighed(self, node: ast.AST, value: Any, items: list[Any]) -> Any:
        self.weights[id(value)] = (value, self.weigh(node, items))
        return self.charged(node, value)

    def charge(self, node: ast.AST, nbytes: int) -> None:
        """Add ``nbytes`` to what the file has built; past ``MAX_BUILT_BYTES`` the load is refused."""
        self.built += nbytes
        if self.built > MAX_BUILT_BYTES:
            self.too_large(node, f"values of more than {MAX_BUILT_BYTES // (1024 * 1024)} MiB in all")

    def charged(self, node: ast.AST, value: Any) -> Any:
        self.charge(node, sys.getsizeof(value))
        return value

    def too_large(self, node: ast.AST, what: str) -> NoReturn:
        line = getattr(node, "lineno", self.line)
        raise ToolFailure(
            ErrorCode.TOO_LARGE,
            f"{self.source} line {line}: {what}; a model file may not cost more than that to load "
            "(split the model, or build it in a notebook cell and pass the DomainModel object)",
        )
