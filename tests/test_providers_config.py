"""Configuration, keys, pricing, the meter, redaction, SSE parsing, retry timing, lazy imports."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path

import pytest
from provider_server import loopback_only  # noqa: F401

from kernel_ext.errors import ErrorCode
from kernel_ext.providers import CostMeter, ProviderConfig, ProviderError, Secret, Usage, build_provider
from kernel_ext.providers.pricing import Pricing, default_pricing
from kernel_ext.providers.redact import MASK, redact, safe_url
from kernel_ext.providers.retry import RetryPolicy, retry_after_seconds
from kernel_ext.providers.sse import SSEEvent, parse_sse

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-proj-Gf3Hs8Kd2Lq7Wp5Zx9Mv4Nb1"

pytestmark = pytest.mark.usefixtures("loopback_only")


def test_nothing_set_means_no_provider():
    config = ProviderConfig.from_env({})
    assert config.provider is None
    with pytest.raises(ProviderError) as caught:
        build_provider(config)
    assert caught.value.code == ErrorCode.NOT_CONFIGURED and "OPENAI_API_KEY" in caught.value.message


def test_inference_and_overrides():
    openai = ProviderConfig.from_env({"OPENAI_API_KEY": KEY})
    assert (openai.provider, openai.model, openai.base_url) == ("openai", "gpt-4o-mini", "https://api.openai.com/v1")
    assert openai.api_key.reveal() == KEY and openai.origin["provider"] == "inferred from the keys set"
    both = ProviderConfig.from_env({"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": "sk-ant-x", "BESSER_LLM_MODEL": "claude-haiku-4-5"})
    assert (both.provider, both.model) == ("anthropic", "claude-haiku-4-5")
    # the model variable belongs to the selected provider, not to an explicit other one
    other = ProviderConfig.from_env({"ANTHROPIC_API_KEY": "sk-ant-x", "BESSER_LLM_MODEL": "claude-haiku-4-5"}, provider="openai")
    assert (other.provider, other.model, other.api_key) == ("openai", "gpt-4o-mini", None)
    local = ProviderConfig.from_env({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "BESSER_LLM_MODEL": "llama3.1"})
    assert (local.provider, local.model, local.origin["base_url"]) == ("openai", "llama3.1", "OPENAI_BASE_URL")
    chosen = ProviderConfig.from_env({"BESSER_LLM_PROVIDER": "Anthropic", "BESSER_LLM_MAX_COST_USD": "2.5", "BESSER_LLM_TIMEOUT_SECONDS": "30"})
    assert (chosen.provider, chosen.max_cost_usd, chosen.timeout) == ("anthropic", 2.5, 30.0)


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"BESSER_LLM_PROVIDER": "gemini"}, "'gemini' is not one of"),
        ({"OPENAI_API_KEY": KEY, "BESSER_LLM_MAX_COST_USD": "lots"}, "BESSER_LLM_MAX_COST_USD='lots'"),
        ({"OPENAI_API_KEY": KEY, "BESSER_LLM_MAX_COST_USD": "-1"}, "not a non-negative number"),
    ],
)
def test_bad_settings_are_named(env, fragment):
    with pytest.raises(ProviderError) as caught:
        ProviderConfig.from_env(env)
    assert caught.value.code == ErrorCode.NOT_CONFIGURED and fragment in caught.value.message


def test_a_vendor_endpoint_without_a_key_is_refused_without_any_connection():
    for provider in ("openai", "anthropic"):
        with pytest.raises(ProviderError) as caught:
            build_provider(ProviderConfig.from_env({"BESSER_LLM_PROVIDER": provider}))
        assert caught.value.code == ErrorCode.NOT_CONFIGURED and "_API_KEY" in caught.value.message
    keyless = build_provider(ProviderConfig.from_env({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}))
    assert keyless.describe()["key"] == "not set (OPENAI_API_KEY)" and keyless.secrets() == ()
    for provider, variable in (("replay", "BESSER_LLM_CASSETTE"), ("scripted", "BESSER_LLM_SCRIPT")):
        with pytest.raises(ProviderError) as caught:
            build_provider(ProviderConfig.from_env({"BESSER_LLM_PROVIDER": provider}))
        assert variable in caught.value.message


def test_the_key_never_prints():
    config = ProviderConfig.from_env({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://user:pw@127.0.0.1:8/v1?token=t"})
    provider = build_provider(config)
    shown = [repr(config), str(config), f"{config.api_key}", f"{config.api_key:>40}", repr(provider), json.dumps(config.describe()), json.dumps(provider.describe()), str(vars(provider))]
    for text in shown:
        assert KEY not in text
    assert config.describe()["endpoint"] == "http://127.0.0.1:8/v1"  # no user-info, no query
    assert "pw" not in json.dumps(provider.describe()) and "token" not in json.dumps(provider.describe())
    with pytest.raises(TypeError):
        pickle.dumps(config.api_key)
    assert Secret(KEY) == Secret(KEY) and not Secret("")


def test_prices_match_families_snapshots_and_router_names():
    pricing = default_pricing()
    assert pricing.price("gpt-4o-mini-2024-07-18") == pricing.price("gpt-4o-mini")
    assert pricing.price("gpt-4o-2024-08-06").input == 2.50
    assert pricing.price("openai/gpt-4.1-mini").output == 1.60
    assert pricing.price("anthropic/claude-3.5-sonnet").input == 3.00
    assert pricing.price("claude-opus-4-5-20251101").input == 5.00
    assert pricing.price("claude-opus-4-1-20250805").input == 15.00
    assert pricing.price("o3-mini-2025-01-31").input == 1.10
    assert pricing.price("llama3.1:8b") is None and pricing.price("gpt-4ox") is None
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000)
    assert pricing.cost("gpt-4o-mini", usage) == pytest.approx(0.15 + 0.60 + 0.075)


def test_custom_price_table_and_meter(tmp_path):
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"models": {"house-model": {"input": 1.0, "output": 2.0}}}))
    meter = CostMeter(cap_usd=3.0, pricing=Pricing(path=table))
    cost, total = meter.add("house-model-v2", Usage(input_tokens=1_000_000, output_tokens=500_000, cache_read_tokens=1_000_000))
    assert cost == pytest.approx(3.0) and total == pytest.approx(3.0)  # cache reads at the input price
    assert meter.add("unknown", Usage(output_tokens=7)) == (None, pytest.approx(3.0))
    with pytest.raises(ProviderError) as caught:
        meter.check()
    assert caught.value.code == ErrorCode.COST_CAP
    snap = meter.snapshot()
    assert snap["calls"] == 2 and snap["unpriced_tokens"] == 7 and snap["unpriced_models"] == ["unknown"]
    with pytest.raises(ValueError):
        CostMeter(cap_usd=-1)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"models": {"m": {"input": "free"}}}))
    with pytest.raises(ValueError, match="'m' is malformed"):
        Pricing(path=broken).price("m")


def test_redaction_cuts_keys_fragments_and_key_shapes():
    assert redact(f"key={KEY}!", [KEY]) == f"key={MASK}!"
    masked = redact(f"Incorrect API key provided: {KEY[:12]}****{KEY[-6:]}", [KEY])
    assert KEY[:12] not in masked  # a long enough fragment is cut; a short tail is harmless
    assert redact("Incorrect key sk-live-abcdefgh12345 here") == f"Incorrect key {MASK} here"
    assert redact('"Authorization": "Bearer abc.def.ghi"') == f'"Authorization": "Bearer {MASK}"'
    assert redact("scikit-learn and sk-learn stay") == "scikit-learn and sk-learn stay"
    assert redact(f"{KEY}", [KEY], shapes=False) == MASK
    assert safe_url("https://u:p@host.example:8443/v1?key=s#f") == "https://host.example:8443/v1"


async def _lines(*lines):
    for line in lines:
        yield line


async def test_sse_parsing_rules():
    events = [e async for e in parse_sse(_lines(": keepalive", "event: delta", "data: {\"a\":", "data:1}", "", "", "data: last"))]
    assert events == [SSEEvent("delta", '{"a":\n1}'), SSEEvent("message", "last")]


def test_retry_after_forms_and_bounded_backoff():
    assert retry_after_seconds({"Retry-After": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = datetime(2025, 1, 1, tzinfo=timezone.utc)
    assert retry_after_seconds({"retry-after": format_datetime(now + timedelta(seconds=30))}, now) == 30.0
    assert retry_after_seconds({"retry-after": "soon"}) is None and retry_after_seconds({}) is None
    policy = RetryPolicy(max_retries=3, base_delay=1.0, max_delay=3.0, jitter=False)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, None]
    assert policy.delay(1, retry_after=5) == 5 and policy.delay(1, retry_after=120) is None


def test_importing_kernel_ext_loads_neither_httpx_nor_the_price_table():
    probe = textwrap.dedent(
        """
        import json, sys
        opened = []
        sys.addaudithook(lambda event, args: event == "open" and "prices.json" in str(args[0]) and opened.append(1))
        import kernel_ext, kernel_ext.providers
        from kernel_ext.cli import build_parser
        from kernel_ext.providers import ProviderConfig, build_provider
        build_parser()
        config = ProviderConfig.from_env({"OPENAI_API_KEY": "sk-x-00000000", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
        provider = build_provider(config)
        before = {name: name in sys.modules for name in ("httpx", "httpcore", "h11")}
        before["prices"] = len(opened)
        from kernel_ext.providers.pricing import default_pricing
        default_pricing().price("gpt-4o")
        default_pricing().price("gpt-4o-mini")
        print(json.dumps({"before": before, "after_prices": len(opened)}))
        """
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True, timeout=60)
    result = json.loads(out.stdout)
    assert result["before"] == {"httpx": False, "httpcore": False, "h11": False, "prices": 0}
    assert result["after_prices"] == 1  # read once, on first use


def test_provider_errors_survive_pickling_with_their_code():
    error = ProviderError(ErrorCode.TIMEOUT, "no answer", {"status": 0})
    again = pickle.loads(pickle.dumps(error))
    assert (again.code, again.message, again.data, str(again)) == ("timeout", "no answer", {"status": 0}, "timeout: no answer")
