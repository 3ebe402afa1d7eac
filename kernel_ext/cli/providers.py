"""``providers check [--provider openai|anthropic] [--model M] [--record CASSETTE]``.

Says which provider, model and endpoint the environment selects, whether a key is set
(never the key), and whether the endpoint answers one minimal streamed request. Exit 0 when
it answered; 1 with the stable error code (``INVALID_KEY`` for a rejected key) otherwise.
``add_provider_arguments``/``provider_from_args`` give other commands (a live run) the same
``--provider/--model/--record/--replay/--script/--max-cost`` options.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the providers load when a command needs one
    from kernel_ext.errors import ToolFailure
    from kernel_ext.providers.base import Provider, Reply

CHECK_PROMPT = "Reply with the single word: ok"
CHECK_MAX_TOKENS = 16


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("providers", help="LLM provider configuration and checks")
    actions = parser.add_subparsers(dest="providers_command", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="show the configured provider and send it one minimal request")
    check.add_argument("--provider", choices=("openai", "anthropic"), help="check this provider instead of the configured one")
    check.add_argument("--model", help="the model to ask (default: BESSER_LLM_MODEL or the provider's default)")
    check.add_argument("--record", metavar="CASSETTE", help="also write the exchange to a cassette")
    check.set_defaults(handler=handle_check)


def add_provider_arguments(parser: argparse.ArgumentParser) -> None:
    """The provider options of a live run (keys still come only from the environment)."""
    group = parser.add_argument_group("LLM provider")
    group.add_argument("--provider", choices=("openai", "anthropic", "replay", "scripted"))
    group.add_argument("--model")
    group.add_argument("--record", metavar="CASSETTE", help="write the session to a cassette (keys are never recorded)")
    group.add_argument("--replay", metavar="CASSETTE", help="answer from a recorded cassette instead of a live model")
    group.add_argument("--script", metavar="FILE", help="answer from an authored script (teaching)")
    group.add_argument("--max-cost", type=float, metavar="USD", help="stop calling the model once this much is spent")


def provider_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Provider:
    """Build the provider ``add_provider_arguments`` options describe. Raises ``ProviderError``."""
    import dataclasses

    from kernel_ext.providers import ProviderConfig, build_provider

    provider = args.provider or ("replay" if args.replay else "scripted" if args.script else None)
    config = ProviderConfig.from_env(env, provider=provider, model=args.model, max_cost_usd=args.max_cost)
    if args.replay or args.script:
        config = dataclasses.replace(config, source=str(args.replay or args.script))
    return build_provider(config, record=args.record)


def code_name(code: str) -> str:
    """The stable code as people see it: ``INVALID_KEY`` for ``invalid_key``."""
    from kernel_ext.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code).upper()


def handle_check(args: argparse.Namespace) -> int:
    from kernel_ext.providers import ProviderConfig, ProviderError, build_provider
    from kernel_ext.providers.factory import NO_PROVIDER_HINT

    try:
        config = ProviderConfig.from_env(provider=args.provider, model=args.model)
    except ProviderError as exc:
        return _failed(exc)
    origin = config.origin
    print(f"provider: {config.provider or 'none'} ({origin.get('provider', '')})")
    if config.provider is None:
        return _failed(ProviderError("not_configured", NO_PROVIDER_HINT))
    if config.is_live:
        described = config.describe()
        print(f"model: {config.model} ({origin.get('model', '')})")
        print(f"endpoint: {described['endpoint']} ({origin.get('base_url', '')})")
        print(f"key: {described['key']}")
    else:
        print(f"source: {config.source or '(not set)'} ({origin.get('source', '')})")
    from kernel_ext.providers.retry import RetryPolicy

    # a check should answer quickly: two short retries, not a run's patient backoff
    quick = RetryPolicy(max_retries=2, base_delay=0.25, max_delay=1.0, max_retry_after=5.0)
    try:
        provider = build_provider(config, record=args.record, retry=quick)
    except ProviderError as exc:
        return _failed(exc)
    if not config.is_live:
        info = provider.describe()
        recorded = f", recorded from {info['recorded_from']}" if info.get("recorded_from") else ""
        print(f"label: {provider.label}{recorded}")
        print(f"kind: {provider.kind} ({info.get('notice', '')}); no endpoint to ask")
        return 0
    started = time.monotonic()
    try:
        reply = asyncio.run(_ask(provider))
    except ProviderError as exc:
        return _failed(exc)
    elapsed = time.monotonic() - started
    print(f"answered: yes, in {elapsed:.2f}s" + (f" after {reply.retries} retries" if reply.retries else ""))
    print(f"reply: {reply.text.strip()[:80]!r} (stop: {reply.stop_reason})")
    usage = reply.usage
    print(f"usage: {usage.input_tokens} input, {usage.output_tokens} output tokens")
    if reply.cost_usd is None:
        print(f"cost: unknown (no price for {config.model!r} in the bundled table)")
    else:
        print(f"cost: ${reply.cost_usd:.6f}")
    if args.record:
        print(f"recorded: {args.record}")
    return 0


async def _ask(provider: Provider) -> Reply:
    from kernel_ext.providers import Conversation

    conversation = Conversation()
    conversation.user(CHECK_PROMPT)
    try:
        return await provider.complete(conversation, max_tokens=CHECK_MAX_TOKENS)
    finally:
        await provider.aclose()


def _failed(exc: ToolFailure) -> int:
    print("answered: no")
    print(f"error: {code_name(exc.code)}: {exc.message}")
    return 1
