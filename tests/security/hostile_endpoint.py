"""A misbehaving model endpoint for the G7 security tests: the real loopback server of
``tests/provider_server.py``, speaking OpenAI or Anthropic streaming, with authored turns
(not a live LLM). Helpers build one turn in either protocol and a live provider pointed at it,
and host a tool loop (``customize``, the loop every run uses) over a real Executor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from provider_server import Plan, anthropic_stream, openai_stream

from kernel_ext.boundary import ExecutionPolicy, Executor
from kernel_ext.pipeline.guards import Budgets, EditChurn
from kernel_ext.pipeline.loop import LoopGuards, customize
from kernel_ext.pipeline.reporting import boundary_observer
from kernel_ext.providers.anthropic import AnthropicProvider
from kernel_ext.providers.messages import Conversation
from kernel_ext.providers.meter import CostMeter
from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.providers.retry import RetryPolicy
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.tools.task_list import TaskList
from kernel_ext.workspace import Workspace

PROTOCOLS = ("openai", "anthropic")
KEY = "sk-test-hostile-endpoint-0123456789"
NO_RETRY = RetryPolicy(max_retries=0, base_delay=0.01, max_delay=0.01, jitter=False)
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}


def provider(protocol: str, server: Any, meter: CostMeter | None = None):
    if protocol == "openai":
        return OpenAICompatProvider(model=MODELS[protocol], base_url=server.url + "/v1", api_key=KEY, retry=NO_RETRY, meter=meter)
    return AnthropicProvider(model=MODELS[protocol], base_url=server.url, api_key=KEY, retry=NO_RETRY, meter=meter)


def turn(protocol: str, text: list[str] = (), calls: list[tuple[Any, str, dict | str]] = (), usage: dict | None = None) -> Plan:
    """One reply: text pieces, then calls ``(endpoint id or None, tool, arguments)``, then usage.

    ``usage`` is ``{"input": ..., "output": ...}`` sent as each protocol names them, values as given.
    """
    wire_calls = [(cid, name, [args if isinstance(args, str) else json.dumps(args)]) for cid, name, args in calls]
    if protocol == "openai":
        raw = None if usage is None else {"prompt_tokens": usage.get("input"), "completion_tokens": usage.get("output")}
        return Plan(chunks=openai_stream(list(text), wire_calls, finish="tool_calls" if calls else "stop", usage=raw))
    usage_in = None if usage is None else {"input_tokens": usage.get("input")}
    output = 1 if usage is None else usage.get("output")
    return Plan(chunks=anthropic_stream(list(text), wire_calls, "tool_use" if calls else "end_turn", usage_in=usage_in, output_tokens=output))


def loop_body(live_provider: Any, ws: Path, outcome: list, *, budgets: Budgets | None = None):
    """A run body: the real tool loop over the default catalog in ``ws``; cards go to the run's approver."""

    async def body(ctx) -> None:
        tasks = TaskList()
        executor = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(ws), "task_list": tasks}),
                            policy=ExecutionPolicy.allowing(["read", "edit", "plan"]), approver=ctx.approver,
                            observer=boundary_observer(ctx.events, ctx.approver), run_id=ctx.run_id)
        conversation = Conversation(system="You write files when asked.")
        conversation.user("write the files")
        outcome.append(await customize(live_provider, conversation, executor, ctx.events, tasks,
                                       LoopGuards(budgets or Budgets(max_turns=30), EditChurn(limit=50))))

    return body


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
