"""Bounds on one streamed reply: its size, its pace, and the run's budget while it arrives.

An endpoint's stream is untrusted input. ``ReplyLimits`` caps what one reply may hold (bytes
on the wire, characters of text and arguments, tool calls, characters per call's arguments)
and how long it may take: an idle timeout that only real progress resets (text or arguments
growing, a call starting; SSE comments, pings and empty chunks do not count) and a total per
call, retries and their waits included. ``CallBudget`` is what the run has left (a wall-clock
deadline, tokens, dollars), passed into the call and checked per chunk, so a budget ends a
stream instead of waiting for it. ``ReplyWatch`` holds one call's counts and names the first
limit reached as a ``ProviderError``. The operator overrides each default by environment.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.events import ProviderError
from kernel_ext.safetext import MAX_CALL_ID_CHARS, MAX_TOOL_NAME_CHARS

__all__ = ["CHARS_PER_TOKEN", "LIMIT_ENV", "CallBudget", "NoWatch", "ReplyLimits", "ReplyWatch"]

CHARS_PER_TOKEN = 4  # the cheap estimate used before an endpoint reports usage

# setting -> (environment variable, default); documented in README "Bounds on a model's reply"
LIMIT_ENV: dict[str, tuple[str, float]] = {
    "max_bytes": ("BESSER_LLM_MAX_REPLY_BYTES", 32 * 1024 * 1024),
    "max_chars": ("BESSER_LLM_MAX_REPLY_CHARS", 2_000_000),
    "max_tool_calls": ("BESSER_LLM_MAX_TOOL_CALLS", 64),
    "max_argument_chars": ("BESSER_LLM_MAX_ARGUMENT_CHARS", 2 * 1024 * 1024),
    "idle_timeout": ("BESSER_LLM_TIMEOUT_SECONDS", 120.0),
    "call_timeout": ("BESSER_LLM_CALL_TIMEOUT_SECONDS", 600.0),
}


@dataclass(frozen=True)
class ReplyLimits:
    max_bytes: int = 32 * 1024 * 1024
    max_chars: int = 2_000_000
    max_tool_calls: int = 64
    max_argument_chars: int = 2 * 1024 * 1024
    idle_timeout: float = 120.0
    call_timeout: float = 600.0
    max_name_chars: int = MAX_TOOL_NAME_CHARS  # a tool's name; fixed, not set by environment
    max_id_chars: int = MAX_CALL_ID_CHARS  # a call's id on the wire

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: float | None) -> ReplyLimits:
        """Defaults, then the environment, then explicit ``overrides`` (None keeps the value)."""
        env = os.environ if env is None else env
        values: dict[str, float] = {}
        for name, (variable, default) in LIMIT_ENV.items():
            text = (env.get(variable) or "").strip()
            value: float = default
            if text:
                try:
                    value = float(text)
                except ValueError:
                    value = -1.0
                if not value > 0 or value == float("inf"):
                    raise ProviderError(ErrorCode.NOT_CONFIGURED, f"{variable}={text!r} is not a positive number")
                if "timeout" not in name and value != int(value):  # a count: 0.5 would become a limit of 0
                    raise ProviderError(ErrorCode.NOT_CONFIGURED, f"{variable}={text!r} is not a whole number")
            if overrides.get(name) is not None:
                value = float(overrides[name])  # type: ignore[arg-type]
            values[name] = value if "timeout" in name else int(value)
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class CallBudget:
    """What the run has left for one call; None means no such budget."""

    deadline: float | None = None  # time.monotonic() at which the run's wall time is spent
    tokens_left: int | None = None
    cost_left_usd: float | None = None


class ReplyWatch:
    """One call's counts against its limits and budget; every ``on_*`` may raise, named."""

    def __init__(
        self,
        limits: ReplyLimits,
        budget: CallBudget | None,
        endpoint: str,
        *,
        price: Callable[[int, int], float | None] = lambda _in, _out: None,
        input_tokens: int = 0,
        cost_left_usd: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.limits = limits
        self.budget = budget or CallBudget()
        self.endpoint = endpoint
        self.price = price
        self.input_tokens = input_tokens
        self.clock = clock
        caps = [c for c in (self.budget.cost_left_usd, cost_left_usd) if c is not None]
        self.cost_left = min(caps) if caps else None
        self.started = self.last_progress = clock()
        self.bytes = self.chars = self.calls = 0
        self._arguments: dict[object, int] = {}

    # -- size ------------------------------------------------------------------------------

    def on_bytes(self, count: int) -> None:
        """Bytes off the wire, heartbeats included (they are not progress)."""
        self.bytes += count
        if self.bytes > self.limits.max_bytes:
            raise self._too_large("reply_bytes", f"more than {self.limits.max_bytes} bytes",
                                  "BESSER_LLM_MAX_REPLY_BYTES")

    def on_text(self, count: int) -> None:
        if count:
            self._grow(count)

    def on_call(self) -> None:
        self.calls += 1
        if self.calls > self.limits.max_tool_calls:
            raise self._too_large("tool_calls", f"more than {self.limits.max_tool_calls} tool calls",
                                  "BESSER_LLM_MAX_TOOL_CALLS")
        self.progress()

    def on_identity(self, name: object, wire_id: object) -> None:
        """A call's name and id as streamed (any piece of either): each is bounded, by name."""
        for value, limit, what in ((name, self.limits.max_name_chars, "a tool name"),
                                   (wire_id, self.limits.max_id_chars, "a tool call id")):
            size = len(value) if isinstance(value, str) else len(str(value)) if value is not None else 0
            if size > limit:
                raise ProviderError(ErrorCode.REPLY_TOO_LARGE, f"the reply from {self.endpoint} was cut off: "
                                    f"{what} of more than {limit} characters", {"limit": what, "max": limit, "size": size})

    def on_arguments(self, call: object, count: int) -> None:
        if not count:
            return
        size = self._arguments[call] = self._arguments.get(call, 0) + count
        if size > self.limits.max_argument_chars:
            raise self._too_large("argument_chars", f"a tool call with more than {self.limits.max_argument_chars} "
                                  "characters of arguments", "BESSER_LLM_MAX_ARGUMENT_CHARS")
        self._grow(count)

    def _grow(self, count: int) -> None:
        self.chars += count
        if self.chars > self.limits.max_chars:
            raise self._too_large("reply_chars", f"more than {self.limits.max_chars} characters",
                                  "BESSER_LLM_MAX_REPLY_CHARS")
        self.progress()
        self._check_spend()

    def _too_large(self, limit: str, what: str, variable: str) -> ProviderError:
        return ProviderError(ErrorCode.REPLY_TOO_LARGE, f"the reply from {self.endpoint} was cut off: {what} ({variable})",
                             {"limit": limit, "endpoint": self.endpoint})

    # -- budget ----------------------------------------------------------------------------

    def output_tokens(self) -> int:
        return -(-self.chars // CHARS_PER_TOKEN)

    def _check_spend(self) -> None:
        out = self.output_tokens()
        left = self.budget.tokens_left
        if left is not None and self.input_tokens + out > left:
            raise ProviderError(ErrorCode.BUDGET, f"token budget spent while the reply arrived (about "
                                f"{self.input_tokens + out} tokens, {max(left, 0)} were left); the reply was cut off",
                                {"budget": "tokens"})
        if self.cost_left is not None:
            cost = self.price(self.input_tokens, out)
            if cost is not None and cost > self.cost_left:
                raise ProviderError(ErrorCode.COST_CAP, f"cost cap reached while the reply arrived (about ${cost:.4f}, "
                                    f"${max(self.cost_left, 0):.4f} was left); the reply was cut off", {"budget": "cost"})

    # -- time ------------------------------------------------------------------------------

    def progress(self) -> None:
        self.last_progress = self.clock()

    def _deadlines(self, idle: bool = True) -> list[tuple[float, str]]:
        limits = self.limits
        out = [(self.started + limits.call_timeout, "call")]
        if idle:
            out.append((self.last_progress + limits.idle_timeout, "idle"))
        if self.budget.deadline is not None:
            out.append((self.budget.deadline, "budget"))
        return out

    def time_left(self, idle: bool = True) -> float:
        """Seconds until the first deadline (no progress, the whole call, the run's wall time)."""
        return min(at for at, _ in self._deadlines(idle)) - self.clock()

    def expired(self, idle: bool = True) -> ProviderError:
        """The named error for the deadline that has passed (the earliest one)."""
        _, which = min(self._deadlines(idle))
        if which == "budget":
            return ProviderError(ErrorCode.BUDGET, f"wall-time budget spent while waiting for {self.endpoint}; the call was "
                                 "stopped", {"budget": "wall_time"})
        if which == "call":
            return ProviderError(ErrorCode.TIMEOUT, f"{self.endpoint} did not finish its reply within "
                                 f"{self.limits.call_timeout:g}s (BESSER_LLM_CALL_TIMEOUT_SECONDS)", {"limit": "call_timeout"})
        return ProviderError(ErrorCode.TIMEOUT, f"the stream from {self.endpoint} stalled: no progress for "
                             f"{self.limits.idle_timeout:g}s (BESSER_LLM_TIMEOUT_SECONDS)", {"limit": "idle_timeout"})

    def check_time(self) -> None:
        if self.time_left() <= 0:
            raise self.expired()

    def allow_wait(self, seconds: float) -> tuple[ErrorCode, str] | None:
        """(code, why) when a wait of ``seconds`` (a backoff, a ``Retry-After``) may not start.

        A wait counts against the run's wall time and the call's total, never against the
        idle timeout (the host chose to wait); it is refused up front, not slept through."""
        now = self.clock()
        if self.budget.deadline is not None and now + seconds > self.budget.deadline:
            return ErrorCode.BUDGET, f"only {max(self.budget.deadline - now, 0):.0f}s are left of the run's wall-time budget"
        end = self.started + self.limits.call_timeout
        if now + seconds > end:
            return ErrorCode.TIMEOUT, (f"only {max(end - now, 0):.0f}s are left of the call's "
                                       f"{self.limits.call_timeout:g}s (BESSER_LLM_CALL_TIMEOUT_SECONDS)")
        return None

    def waited(self) -> None:
        """A chosen wait is over: the idle clock starts again."""
        self.progress()


class NoWatch:
    """Counts nothing: an assembler used on its own (a test feeding it events by hand)."""

    def on_text(self, count: int) -> None: ...

    def on_call(self) -> None: ...

    def on_identity(self, name: object, wire_id: object) -> None: ...

    def on_arguments(self, call: object, count: int) -> None: ...
