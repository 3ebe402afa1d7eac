"""The configuration a client may see: features, sandbox policy, provider presence.

Jupyter-free so ``%besser config`` shows the same shape in-process. It says whether a provider
is configured and which one, never a key, a token or an endpoint's credentials.
"""

from __future__ import annotations

import sys
from typing import Any

from kernel_ext.hosting.manager import RunManager
from kernel_ext.hosting.options import OperatorSettings
from kernel_ext.hosting.requests import KINDS
from kernel_ext.version import __version__

SCENARIOS = ("side-effects",)


def describe_configuration(
    operator: OperatorSettings, manager: RunManager | None = None, *, mode: str = "server", sandbox: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "version": __version__,
        "mode": mode,
        "features": {
            "shell_tools_enabled": operator.shell_tools_enabled,
            "toolchain_validation": operator.toolchain_validation,
            "auto_fix": operator.auto_fix,
            "max_repair_rounds": operator.max_repair_rounds,
            "import_smoke_check": operator.import_smoke_check,
            "shell_runbook": operator.shell_runbook,
            "extra_roots": list(operator.extra_roots),
            "kinds": list(KINDS),
            "scenarios": list(SCENARIOS),
        },
        "sandbox": sandbox or describe_sandbox(operator),
        "provider": {**describe_provider(operator), **last_budget_refusal(manager)},
        "app_environment": describe_app_environment(),
        "budgets": operator.budget_caps(),
        "runs": describe_runs(operator, manager),
        "approval_timeout_s": manager.approval_timeout if manager is not None else operator.approval_timeout_s,
        "runs_dir": str(manager.runs_dir) if manager is not None else None,
    }


def last_budget_refusal(manager: RunManager | None) -> dict[str, Any]:
    """``{"budget": ...}`` when the run that ended last here ended ``budget_exhausted``: its figures
    as the endpoint gave them, so a student sees why their runs stop; else nothing. Reads the
    errors of that one run (a config answer stays cheap)."""
    run = manager.last_ended if manager is not None else None
    if run is None or run.status != "budget_exhausted":
        return {}
    refusal = next((e for e in reversed(run.events.of_type("error")) if getattr(e, "code", "") == "BUDGET_EXHAUSTED"), None)
    return {"budget": {"exhausted": True, "run_id": run.id, "spent_usd": getattr(refusal, "spent_usd", None),
                       "limit_usd": getattr(refusal, "limit_usd", None), "message": getattr(refusal, "message", "")}}


def describe_runs(operator: OperatorSettings, manager: RunManager | None) -> dict[str, Any]:
    """How many runs run at once here, and how many run and wait now."""
    admission = manager.admission if manager is not None else None
    return {"max_concurrent": operator.max_concurrent_runs,
            "running": admission.running if admission is not None else 0,
            "queued": admission.waiting if admission is not None else 0}


def describe_app_environment() -> dict[str, Any]:
    """Where a generated app's missing packages may come from (kernel_ext.appenv), and its cache."""
    from kernel_ext.appenv.settings import AppEnvSettings

    settings = AppEnvSettings.from_environment()
    return {"interpreter": sys.executable, "python": sys.version.split()[0], "sources": settings.sources(),
            "fetches": settings.can_fetch, "cache": str(settings.cache)}


def describe_sandbox(operator: OperatorSettings) -> dict[str, Any]:
    """The policy and the tier its self-test chose (checked once per process)."""
    from kernel_ext.sandbox import choose_tier

    choice = choose_tier(operator.sandbox_policy)
    return {
        "policy": operator.sandbox_policy,
        "tier": str(choice.tier) if choice.available else None,
        "limits": list(choice.limits(network=False)) if choice.available else [],
        "note": "" if choice.available else "the shell sandbox is unavailable on this server; commands are refused",
    }


def describe_provider(operator: OperatorSettings) -> dict[str, Any]:
    """Which provider a run would use, and whether one is configured at all (no key, ever)."""
    from kernel_ext.providers.config import ProviderConfig

    try:
        config = ProviderConfig.from_env(provider=operator.provider, model=operator.llm_model)
    except Exception as exc:  # noqa: BLE001 - a bad setting is reported, not raised: config must always answer
        return {"configured": False, "provider": operator.provider or "none", "problem": str(getattr(exc, "message", exc))}
    described = {k: v for k, v in config.describe().items() if k in ("provider", "model", "endpoint", "key", "source")}
    configured = config.provider is not None and (not config.is_live or bool(config.api_key) or config.origin.get("base_url") != "default")
    return {"configured": configured, **described}

