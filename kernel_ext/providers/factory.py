"""Building the provider a configuration names (live, replay or scripted).

Live providers without a key are refused only for the vendors' own endpoints; a custom base
URL (a local or self-hosted server) may need none. ``record`` turns on cassette writing.
Nothing here opens a connection or imports httpx.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.base import Provider
from kernel_ext.providers.config import DEFAULT_BASE_URLS, SOURCE_ENV, URL_ENV, ProviderConfig
from kernel_ext.providers.events import ProviderError
from kernel_ext.providers.meter import CostMeter

if TYPE_CHECKING:  # the live clients load only when one is built
    from kernel_ext.providers.live import LiveProvider
    from kernel_ext.providers.retry import RetryPolicy

__all__ = ["NO_PROVIDER_HINT", "build_provider"]

NO_PROVIDER_HINT = (
    "no LLM provider is configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY, OPENAI_BASE_URL for a "
    "local OpenAI-compatible server, or BESSER_LLM_PROVIDER=replay with BESSER_LLM_CASSETTE"
)


def build_provider(
    config: ProviderConfig | None = None,
    *,
    record: str | Path | None = None,
    meter: CostMeter | None = None,
    retry: RetryPolicy | None = None,
    strict_replay: bool = True,
    root: str | None = None,
) -> Provider:
    """The provider for ``config`` (default: from the environment). Raises ``NOT_CONFIGURED``.

    A replay's or script's file is read here, under ``root`` when given (``sources.py``): call it
    off the event loop."""
    config = config if config is not None else ProviderConfig.from_env()
    if config.provider is None:
        raise ProviderError(ErrorCode.NOT_CONFIGURED, NO_PROVIDER_HINT)
    meter = meter if meter is not None else CostMeter(config.max_cost_usd)
    provider: Provider
    if config.is_live:
        if not config.api_key and config.base_url.rstrip("/") == DEFAULT_BASE_URLS[config.provider]:
            raise ProviderError(
                ErrorCode.NOT_CONFIGURED,
                f"{config.provider} needs {config.key_env} (a custom {URL_ENV[config.provider]} may work without one)",
            )
        live: type[LiveProvider]
        if config.provider == "openai":
            from kernel_ext.providers.openai_compat import OpenAICompatProvider

            live = OpenAICompatProvider
        else:
            from kernel_ext.providers.anthropic import AnthropicProvider

            live = AnthropicProvider
        provider = live(
            model=config.model,
            base_url=config.base_url,
            api_key=config.api_key,
            timeout=config.timeout,
            retry=retry,
            meter=meter,
            max_tokens=config.max_tokens,
        )
    else:
        if not config.source:
            raise ProviderError(
                ErrorCode.NOT_CONFIGURED, f"{config.provider} needs {SOURCE_ENV[config.provider]} (a file path)"
            )
        if config.provider == "replay":
            from kernel_ext.providers.replay import ReplayProvider

            provider = ReplayProvider(config.source, strict=strict_replay, meter=meter, root=root)
        else:
            from kernel_ext.providers.scripted import Script, ScriptedProvider

            provider = ScriptedProvider(Script.from_file(config.source, root), meter=meter)
    if record is not None:
        provider.record(record)
    return provider
