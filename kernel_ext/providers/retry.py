"""Bounded retries with exponential backoff, honouring ``Retry-After``.

Only failures before a reply starts are retried (429, 5xx, 408/409, timeouts and dropped
connections); once events have been streamed to the caller a failure is final, because
repeating the request would repeat text the user already saw. The policy knows nothing
about HTTP libraries: an attempt raises ``RetryableError`` to ask for another try.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar

from kernel_ext.providers.cancel import CancelGuard
from kernel_ext.providers.events import ProviderError, Retrying

__all__ = ["RETRY_STATUSES", "Attempted", "RetryPolicy", "RetryableError", "retry_after_seconds", "retrying"]

T = TypeVar("T")

RELAYED = "llm_provider-"  # LiteLLM's prefix for the headers of the server behind it
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    jitter: bool = True

    def delay(self, retry: int, retry_after: float | None = None) -> float | None:
        """Seconds before retry number ``retry`` (1-based), or None to give up."""
        if retry > self.max_retries:
            return None
        if retry_after is not None:
            return None if retry_after > self.max_retry_after else max(0.0, retry_after)
        backoff = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        return backoff * random.uniform(0.5, 1.0) if self.jitter else backoff


class RetryableError(Exception):
    """An attempt failed in a way worth retrying; ``error`` is raised if retries run out."""

    def __init__(self, error: ProviderError, retry_after: float | None = None):
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after


@dataclass(frozen=True)
class Attempted(Generic[T]):
    """The value of the attempt that succeeded (last item of ``retrying``)."""

    value: T


async def retrying(
    attempt: Callable[[], Awaitable[T]], policy: RetryPolicy, guard: CancelGuard, watch: Any = None
) -> AsyncGenerator[Retrying | Attempted[T], None]:
    """Run ``attempt`` until it succeeds; yield a ``Retrying`` notice before each backoff.

    With a ``watch`` (providers/bounds.py), a wait that would pass the call's total or the
    run's wall-time deadline is not started: the call gives up at once, naming why."""
    retry = 0
    while True:
        failure: RetryableError | None = None
        try:
            value = await guard.run(attempt(), "waiting for the endpoint")
        except RetryableError as exc:
            failure = exc
        if failure is None:
            yield Attempted(value)
            return
        # raised outside the except block so no transport exception rides along as context
        retry += 1
        delay = policy.delay(retry, failure.retry_after)
        if delay is None:
            raise _exhausted(failure, retry - 1, policy)
        refused = watch.allow_wait(delay) if watch is not None else None
        if refused is not None:
            raise _out_of_time(failure, delay, *refused)
        yield Retrying(retry, delay, failure.error.code, failure.error.message)
        await guard.run(asyncio.sleep(delay), "backing off before a retry")
        if watch is not None:
            watch.waited()


def _exhausted(failure: RetryableError, retries: int, policy: RetryPolicy) -> ProviderError:
    error = failure.error
    if failure.retry_after is not None and failure.retry_after > policy.max_retry_after:
        note = f" (the endpoint asks to wait {failure.retry_after:.0f}s, more than the {policy.max_retry_after:.0f}s allowed)"
    else:
        note = f" (after {retries} retries)" if retries else ""
    return ProviderError(error.code, error.message + note, {**error.data, "retries": retries})


def _out_of_time(failure: RetryableError, delay: float, code: str, why: str) -> ProviderError:
    error = failure.error
    message = f"{error.message} (a retry would wait {delay:.0f}s, but {why}; no retry)"
    return ProviderError(code, message, {**error.data, "retry_wait_s": round(delay, 3)})


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), the endpoint's own or,
    when it sent neither, the ones a proxy relayed from the server behind it; else None."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after" not in lowered and "retry-after-ms" not in lowered:
        # LiteLLM's proxy (1.108.7) relays the upstream's headers under its own prefix only
        lowered = {k.removeprefix(RELAYED): v for k, v in lowered.items() if k.startswith(RELAYED)}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
