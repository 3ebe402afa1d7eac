"""Which provider, model, endpoint and key a run uses: from the environment or server config only.

The names are the ones users already have set: ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``, plus ``BESSER_LLM_PROVIDER`` and
``BESSER_LLM_MODEL``. A key is held in a ``Secret`` whose str and repr are masked, so a
config printed, logged or put in an event never shows it. A custom base URL works without
a key (Ollama, vLLM, llama.cpp server and LM Studio usually need none).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.events import ProviderError

__all__ = ["DEFAULT_BASE_URLS", "DEFAULT_MODELS", "ENV", "LIVE_PROVIDERS", "PROVIDERS", "ProviderConfig", "Secret"]

LIVE_PROVIDERS = ("openai", "anthropic")
PROVIDERS = (*LIVE_PROVIDERS, "replay", "scripted")
DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
SOURCE_ENV = {"replay": "BESSER_LLM_CASSETTE", "scripted": "BESSER_LLM_SCRIPT"}
ENV = (
    "BESSER_LLM_PROVIDER",
    "BESSER_LLM_MODEL",
    *KEY_ENV.values(),
    *URL_ENV.values(),
    *SOURCE_ENV.values(),
    "BESSER_LLM_MAX_COST_USD",
    "BESSER_LLM_TIMEOUT_SECONDS",  # seconds without progress in a reply (providers/bounds.py)
    "BESSER_LLM_CALL_TIMEOUT_SECONDS",
    "BESSER_LLM_MAX_REPLY_BYTES",
    "BESSER_LLM_MAX_REPLY_CHARS",
    "BESSER_LLM_MAX_TOOL_CALLS",
    "BESSER_LLM_MAX_ARGUMENT_CHARS",
)


class Secret:
    """A key. ``reveal()`` is the only way to the value; everything else prints ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __format__(self, spec: str) -> str:
        return "***"

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> Any:
        raise TypeError("a Secret is not pickled; pass configuration through the environment")


@dataclass(frozen=True)
class ProviderConfig:
    """A resolved provider choice. ``origin`` says where each setting came from."""

    provider: str | None
    model: str = ""
    api_key: Secret | None = None
    base_url: str = ""
    source: str = ""  # cassette (replay) or script (scripted) path
    max_cost_usd: float | None = None
    timeout: float = 120.0
    max_tokens: int | None = None
    origin: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def key_env(self) -> str:
        return KEY_ENV.get(self.provider or "", "")

    @property
    def is_live(self) -> bool:
        return self.provider in LIVE_PROVIDERS

    def describe(self) -> dict[str, Any]:
        """For people and events: never the key, only whether one is set."""
        from kernel_ext.providers.redact import safe_url

        out: dict[str, Any] = {"provider": self.provider or "none", "model": self.model}
        if self.is_live:
            out["endpoint"] = safe_url(self.base_url)
            out["key"] = f"{'set' if self.api_key else 'not set'} ({self.key_env})"
        if self.source:
            out["source"] = self.source
        if self.max_cost_usd is not None:
            out["max_cost_usd"] = self.max_cost_usd
        return out

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        provider: str | None = None,
        model: str | None = None,
        max_cost_usd: float | None = None,
    ) -> ProviderConfig:
        """Resolve from ``env`` (default ``os.environ``); arguments override the environment.

        Without ``BESSER_LLM_PROVIDER`` the provider is inferred: Anthropic when its key is
        set, else OpenAI when its key or base URL is set, else none (Phase 2 says so plainly).
        """
        env = os.environ if env is None else env
        get = lambda name: (env.get(name) or "").strip()  # noqa: E731
        origin: dict[str, str] = {}
        chosen = get("BESSER_LLM_PROVIDER").lower()
        inferred = chosen or _infer(get)
        if provider:
            name, origin["provider"] = provider.lower(), "argument"
        elif chosen:
            name, origin["provider"] = chosen, "BESSER_LLM_PROVIDER"
        else:
            name, origin["provider"] = inferred, "inferred from the keys set"
        if not name:
            return cls(None, origin={"provider": "nothing set"})
        if name not in PROVIDERS:
            raise ProviderError(
                ErrorCode.NOT_CONFIGURED, f"provider {name!r} is not one of {', '.join(PROVIDERS)}"
            )
        if model:
            resolved_model, origin["model"] = model, "argument"
        elif get("BESSER_LLM_MODEL") and name == inferred:
            resolved_model, origin["model"] = get("BESSER_LLM_MODEL"), "BESSER_LLM_MODEL"
        else:
            resolved_model, origin["model"] = DEFAULT_MODELS.get(name, ""), "default"
        key = base_url = source = ""
        if name in LIVE_PROVIDERS:
            key = get(KEY_ENV[name])
            base_url = get(URL_ENV[name])
            origin["base_url"] = URL_ENV[name] if base_url else "default"
            base_url = base_url or DEFAULT_BASE_URLS[name]
        else:
            source = get(SOURCE_ENV[name])
            origin["source"] = SOURCE_ENV[name]
        cost = max_cost_usd if max_cost_usd is not None else _number(get, "BESSER_LLM_MAX_COST_USD")
        timeout = _number(get, "BESSER_LLM_TIMEOUT_SECONDS")
        return cls(
            name,
            resolved_model,
            Secret(key) if key else None,
            base_url,
            source,
            cost,
            timeout if timeout else 120.0,
            origin=origin,
        )


def _infer(get: Any) -> str:
    if get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if get("OPENAI_API_KEY") or get("OPENAI_BASE_URL"):
        return "openai"
    if get("ANTHROPIC_BASE_URL"):
        return "anthropic"
    return ""


def _number(get: Any, name: str) -> float | None:
    text = get(name)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0 or value != value:
        raise ProviderError(ErrorCode.NOT_CONFIGURED, f"{name}={text!r} is not a non-negative number")
    return value
