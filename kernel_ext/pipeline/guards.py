"""One guard per characteristic way an agent loop fails.

- ``Budgets``: turns, tokens, cost and wall time; the first one spent ends the run, named.
- ``condense_context``: keeps the conversation inside a context budget by shortening older
  tool results (then evicting the oldest exchanges), keeping the request and recent turns.
- ``EditChurn``: the same file edited again and again without progress is refused.
- ``victory_refusal``: "done" while tasks are open (not blocked with a reason) or retained
  scenarios fail is refused.
- ``truncated_call``: a call cut off by the output limit is refused, never applied.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from kernel_ext.providers.bounds import CallBudget
from kernel_ext.providers.messages import AssistantMessage, Conversation, ToolResultMessage, ToolUse, summarise

EDIT_TOOLS = frozenset({"replace_file_lines", "modify_file", "write_file", "delete_file"})


@dataclass
class Budgets:
    max_turns: int = 40
    max_tokens: int = 2_000_000
    max_cost_usd: float = 2.0
    max_runtime_s: float = 1800.0
    started: float = field(default_factory=time.monotonic)
    turns: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    exhausted: str = ""  # the endpoint's word that the key's own budget is spent (BUDGET_EXHAUSTED)

    def spent(self) -> str | None:
        """The name and figure of the first budget spent, or None."""
        if self.exhausted:
            return self.exhausted
        if self.turns >= self.max_turns:
            return f"turn budget spent ({self.turns} of {self.max_turns} turns)"
        if self.tokens >= self.max_tokens:
            return f"token budget spent ({self.tokens} of {self.max_tokens} tokens)"
        if self.cost_usd >= self.max_cost_usd > 0:
            return f"cost cap reached (${self.cost_usd:.4f} of ${self.max_cost_usd:.2f})"
        if self.elapsed() >= self.max_runtime_s:
            return f"wall-time budget spent ({self.elapsed():.0f} s of {self.max_runtime_s:.0f} s)"
        return None

    def ending(self, status: str, summary: str) -> tuple[str, str]:
        """A run whose key ran out of budget at the endpoint ends ``budget_exhausted``, whatever
        else holds, and its summary says so first."""
        return ("budget_exhausted", f"{self.exhausted}; {summary}") if self.exhausted else (status, summary)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def turns_left(self) -> int:
        return max(self.max_turns - self.turns, 0)

    def call_budget(self) -> CallBudget:
        """What is left, handed to a provider call so a stream stops when a budget is spent."""
        return CallBudget(
            deadline=self.started + self.max_runtime_s,
            tokens_left=max(self.max_tokens - self.tokens, 0),
            cost_left_usd=max(self.max_cost_usd - self.cost_usd, 0.0) if self.max_cost_usd > 0 else None,
        )


def estimate_tokens(conversation: Conversation) -> int:
    """A cheap, provider-independent estimate (4 characters a token)."""
    total = len(conversation.system)
    for message in conversation.messages:
        if isinstance(message, AssistantMessage):
            total += len(message.text) + sum(len(c.arguments) + len(c.name) for c in message.tool_calls)
        elif isinstance(message, ToolResultMessage):
            total += len(message.content)
        else:
            total += len(message.text)
    return total // 4


def condense_context(conversation: Conversation, budget_tokens: int, keep_recent: int = 6) -> int:
    """Shrink ``conversation`` in place to fit ``budget_tokens``; returns messages changed.

    First, tool results older than the last ``keep_recent`` are replaced by a one-line note
    (task-list answers are kept: they are the plan). If that is not enough, the oldest whole
    exchanges after the first user message are evicted, keeping call/result pairs together.
    """
    if estimate_tokens(conversation) <= budget_tokens:
        return 0
    changed = 0
    results = [(i, m) for i, m in enumerate(conversation.messages) if isinstance(m, ToolResultMessage)]
    for index, message in results[:-keep_recent] if keep_recent else results:
        if message.name == "task_list" or message.content.startswith("[condensed"):
            continue
        note = f"[condensed: earlier {message.name} result ({len(message.content)} characters); call it again if you need it]"
        conversation.messages[index] = ToolResultMessage(message.call_id, message.name, note, message.is_error)
        changed += 1
    while estimate_tokens(conversation) > budget_tokens:
        span = _oldest_exchange(conversation, keep_recent)
        if span is None:
            break
        start, end = span
        del conversation.messages[start:end]
        changed += end - start
    return changed


def _oldest_exchange(conversation: Conversation, keep_recent: int) -> tuple[int, int] | None:
    """The first assistant message after the opening request, with its tool results."""
    messages = conversation.messages
    limit = len(messages) - keep_recent
    for start in range(1, max(limit, 1)):
        if isinstance(messages[start], AssistantMessage):
            end = start + 1
            while end < len(messages) and isinstance(messages[end], ToolResultMessage):
                end += 1
            return (start, end) if end <= limit else None
    return None


@dataclass
class EditChurn:
    """Counts edits per file since the last progress; past ``limit`` further edits are refused."""

    limit: int = 5
    counts: Counter = field(default_factory=Counter)

    def check(self, name: str, arguments: dict | None) -> str | None:
        if name not in EDIT_TOOLS or not arguments:
            return None
        path = str(arguments.get("path", ""))
        if self.counts[path] >= self.limit:
            return (
                f"{path!r} was edited {self.counts[path]} times without progress; this edit was not applied. "
                "Step back: read the file again, check the failing task or finding, or mark the task blocked with a reason."
            )
        return None

    def record(self, name: str, arguments: dict | None, ok: bool) -> None:
        if ok and name in EDIT_TOOLS and arguments:
            self.counts[str(arguments.get("path", ""))] += 1

    def progress(self) -> None:
        """A task was completed or validation improved: every file starts again."""
        self.counts.clear()


def victory_refusal(open_tasks: Iterable[str], failing_scenarios: Iterable[str]) -> str | None:
    """A message refusing "done" while work is open, naming the work; None when it may end."""
    tasks, scenarios = list(open_tasks), list(failing_scenarios)
    if not tasks and not scenarios:
        return None
    parts = []
    if tasks:
        parts.append("open tasks: " + _listing(tasks, "; "))
    if scenarios:
        parts.append("failing API scenarios: " + _listing(scenarios, ", "))
    return (
        "Not done yet: " + " | ".join(parts) + ". Finish them, prove them with task_list evidence, "
        "or mark a task blocked with the reason it cannot be done."
    )


def _listing(items: list[str], sep: str, each: int = 300, total: int = 4000) -> str:
    """Items for a message sent back to the model: each one and the whole bounded."""
    return summarise(sep.join(summarise(item, each) for item in items), total)


def truncated_call(call: ToolUse, stop_reason: str) -> str | None:
    """A refusal for a call whose arguments were cut off by the output limit."""
    if stop_reason not in ("max_tokens", "length") or call.parsed() is not None:
        return None
    return (
        f"Your {call.name} call was cut off by the output limit ({len(call.arguments)} characters of arguments "
        "arrived, not valid JSON); nothing was applied. Send smaller pieces: edit a range with "
        "replace_file_lines instead of rewriting a whole file."
    )
