"""LLM providers: OpenAI-compatible and Anthropic over httpx, plus replay and scripted ones.

Import-light: this package imports neither httpx nor the price table; both load when a
live provider sends its first request or a cost is first computed.
"""

from __future__ import annotations

from kernel_ext.providers.base import Provider, Reply
from kernel_ext.providers.config import ProviderConfig, Secret
from kernel_ext.providers.events import (
    Event,
    ProviderError,
    Retrying,
    Stop,
    TextDelta,
    ToolCallDone,
    Usage,
    UsageUpdate,
)
from kernel_ext.providers.factory import build_provider
from kernel_ext.providers.messages import Conversation, ToolUse
from kernel_ext.providers.meter import CostMeter

__all__ = [
    "Conversation",
    "CostMeter",
    "Event",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "Reply",
    "Retrying",
    "Secret",
    "Stop",
    "TextDelta",
    "ToolCallDone",
    "ToolUse",
    "Usage",
    "UsageUpdate",
    "build_provider",
]
