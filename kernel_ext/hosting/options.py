"""What a caller may ask of a run, and what only the operator decides.

``RunRequest`` is the part a person (magic, REST body, CLI) chooses. ``OperatorSettings`` is
fixed at server (or library call) start: shell tools, toolchain validation, sandbox policy,
the provider's keys, whether model method bodies may be asked for (``BESSER_MODEL_METHOD_BODIES``).
A request can never widen operator settings: unknown fields such as ``allow_shell_tools`` are
dropped when a body is parsed, and nothing here reads them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from kernel_ext.errors import ConfigurationError
from kernel_ext.model.method_bodies import ENV as METHOD_BODIES_ENV
from kernel_ext.model.method_bodies import method_mode
from kernel_ext.sandbox import env_flag

ApproveMode = Literal["none", "edits", "shell", "all"]

# The request budgets an operator may cap (``OperatorSettings``): a request asking for more gets the cap.
BUDGET_CAPS = ("max_turns", "max_cost_usd", "max_runtime_s")


class BudgetArgs(TypedDict, total=False):
    """A run's budgets and switches as a library caller passes them (any left out keeps ``RunRequest``'s default)."""

    max_turns: int
    max_cost_usd: float
    max_runtime_s: float
    auto_fix: bool
    repair_rounds: int
    enable_import_smoke_check: bool


class RunRequest(BaseModel):
    """A request to generate (or modify) an app from a model. Extra fields are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    request: str = Field(min_length=1, max_length=20_000)
    model_path: str | None = None
    model_json: dict[str, Any] | None = None
    target: str | None = Field(default=None, description="an explicitly chosen generator; saves the select call")
    provider: str | None = Field(default=None, description="none | replay:CASSETTE | scripted:NAME | openai | anthropic")
    llm_model: str | None = None
    approve: ApproveMode = Field(default="none", description="categories approved without a card (a person's choice)")
    base_run_id: str | None = Field(default=None, description="continue an existing run's workspace (modify run)")
    max_turns: int = Field(default=40, ge=1, le=400)
    max_cost_usd: float = Field(default=2.0, ge=0)
    max_runtime_s: float = Field(default=1800, gt=0)
    # Switches a request may turn off (never on past the operator): see ``run_switches``.
    auto_fix: bool | None = Field(default=None, description="Phase 3's repair rounds (default: the operator's, on)")
    repair_rounds: int | None = Field(default=None, ge=0, le=100, description="Phase 3's round budget (default: at least 5, "
                                      "up to the turns left), within the operator's cap")
    enable_import_smoke_check: bool | None = Field(default=None, description="run the generated app (import, start-up, "
                                                   "create probes) in validation (default: the operator's, on)")


ScenarioStep = Literal["edit", "test"]
SCENARIO_STEPS: tuple[ScenarioStep, ...] = ("edit", "test")


class ScenarioRequest(BaseModel):
    """A request to host an authored teaching scenario (chapter 5's calculator)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    scenario: Literal["side-effects"] = "side-effects"
    allow: list[ScenarioStep] = Field(default_factory=lambda: list(SCENARIO_STEPS))


@dataclass(frozen=True)
class OperatorSettings:
    """Decisions of whoever started the server or called the library; never of a request."""

    shell_tools_enabled: bool = False
    toolchain_validation: bool = False
    sandbox_policy: str = "auto"
    provider: str | None = None
    llm_model: str | None = None
    approval_timeout_s: float | None = None  # None: a card waits; from_environment gives the operator's default
    model_method_bodies: str = "ask"  # "ask" (a card) | "off" (stubs): model/method_bodies.py
    # Where a request's ``model_path`` may point: a file under this folder, opened through the fence
    # (the server sets its root_dir). None: any path (library callers, the CLI, in-process magics).
    model_root: str | None = None
    # Caps on a request's budgets (None: the request's own value stands); see ``requests.capped``.
    max_turns: int | None = None
    max_cost_usd: float | None = None
    max_runtime_s: float | None = None
    # Phase 3 repair (``BESSER_LLM_ENABLE_AUTO_FIX``), its round cap (``BESSER_LLM_MAX_REPAIR_ROUNDS``),
    # the runtime probes (``BESSER_LLM_ENABLE_IMPORT_SMOKE_CHECK``), Phase 2's shell runbook
    # (``BESSER_LLM_SHELL_RUNBOOK``), and folders the file tools may use beside the run's app
    # (``BESSER_EXTRA_ROOTS``, absolute folders separated by ``os.pathsep``).
    auto_fix: bool = True
    max_repair_rounds: int | None = None
    import_smoke_check: bool = True
    shell_runbook: bool = True
    extra_roots: tuple[str, ...] = ()
    # Runs hosted at once; more wait in the queue (``hosting/admission.py``). None: no limit (a
    # library caller's own runs); ``from_environment`` gives ``BESSER_MAX_CONCURRENT_RUNS`` or the machine's default.
    max_concurrent_runs: int | None = None

    def budget_caps(self) -> dict[str, int | float]:
        """The caps the operator set, by budget name (what ``%besser config`` shows)."""
        caps = {name: getattr(self, name) for name in BUDGET_CAPS}
        return {name: value for name, value in caps.items() if value is not None}

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None, **explicit: Any) -> OperatorSettings:
        """Environment at start-up, with explicit arguments (library callers) taking precedence."""
        env = environ if environ is not None else dict(os.environ)
        values: dict[str, Any] = {
            "shell_tools_enabled": env_flag(env.get("BESSER_LLM_ENABLE_SHELL_TOOLS")),
            "toolchain_validation": env_flag(env.get("BESSER_LLM_ENABLE_TOOLCHAIN_VALIDATION")),
            "sandbox_policy": env.get("BESSER_SANDBOX", "auto") or "auto",
            "provider": env.get("BESSER_LLM_PROVIDER") or None,
            "llm_model": env.get("BESSER_LLM_MODEL") or None,
            "model_method_bodies": method_mode(env.get(METHOD_BODIES_ENV)),
            "auto_fix": _on_unless_off(env.get("BESSER_LLM_ENABLE_AUTO_FIX")),
            "max_repair_rounds": _count(env, "BESSER_LLM_MAX_REPAIR_ROUNDS"),
            "import_smoke_check": _on_unless_off(env.get("BESSER_LLM_ENABLE_IMPORT_SMOKE_CHECK")),
            "shell_runbook": _on_unless_off(env.get("BESSER_LLM_SHELL_RUNBOOK")),
            "extra_roots": tuple(p for p in (env.get("BESSER_EXTRA_ROOTS") or "").split(os.pathsep) if p.strip()),
            "max_concurrent_runs": _count(env, RUN_LIMIT_ENV, "runs (at least 1)"),
            "approval_timeout_s": approval_timeout(env.get(APPROVAL_TIMEOUT_ENV)),
        }
        values.update({k: v for k, v in explicit.items() if v is not None})
        if values["approval_timeout_s"] is not None and values["approval_timeout_s"] <= 0:
            values["approval_timeout_s"] = None  # 0 (a traitlet or the variable): cards wait for a person
        values["extra_roots"] = extra_roots(values.get("extra_roots", ()))
        if values["max_concurrent_runs"] is None:
            values["max_concurrent_runs"] = default_run_limit()
        if values["max_concurrent_runs"] < 1:
            raise ConfigurationError(f"{RUN_LIMIT_ENV} / max_concurrent_runs: at least 1 run must be allowed at once")
        return cls(**values)


APPROVAL_TIMEOUT_ENV = "BESSER_APPROVAL_TIMEOUT_SECONDS"
DEFAULT_APPROVAL_TIMEOUT_S = 1800.0  # 30 minutes: a forgotten card ends as denied instead of holding the run forever


def approval_timeout(value: str | None) -> float | None:
    """The operator's approval timeout: unset is 30 minutes, ``0`` waits forever, else seconds."""
    text = (value or "").strip()
    if not text:
        return DEFAULT_APPROVAL_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        raise ConfigurationError(f"{APPROVAL_TIMEOUT_ENV}={text!r}: expected seconds (0: cards wait for a person)") from None
    if seconds != seconds or seconds < 0 or seconds == float("inf"):
        raise ConfigurationError(f"{APPROVAL_TIMEOUT_ENV}={text!r}: expected a finite, non-negative number of seconds")
    return seconds or None


def _on_unless_off(value: str | None) -> bool:
    """A switch that is on by default: unset or empty keeps it on, ``0`` / ``false`` / ``no`` / ``off`` turn it off."""
    return True if not (value or "").strip() else env_flag(value)


def _count(env: dict[str, str], name: str, what: str = "rounds (0 turns repair off)") -> int | None:
    text = (env.get(name) or "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise ConfigurationError(f"{name}={text!r}: expected a whole number of {what}")
    return int(text)


RUN_LIMIT_ENV = "BESSER_MAX_CONCURRENT_RUNS"
RUN_MEMORY_BYTES = 512 * 1024 * 1024  # one run at its peak, with room: the demo measured ~175 MiB (server share, app host, sandboxes)


def default_run_limit() -> int:
    """Runs at once when the operator says nothing: one per core the server may use, fewer when
    memory is shorter (``RUN_MEMORY_BYTES`` each), never below 2 (a run waiting at a card must
    not hold up every other)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(cores, _memory_bytes() // RUN_MEMORY_BYTES))


def _memory_bytes() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 50  # unknown: memory does not lower the limit


def extra_roots(paths: Any) -> tuple[str, ...]:
    """The operator's extra fence roots: absolute, existing folders (a configuration error is named, at start)."""
    found = []
    for path in paths:
        text = os.fspath(path).strip()
        if not os.path.isabs(text) or not os.path.isdir(text):
            raise ConfigurationError(f"extra fence root {text!r} (BESSER_EXTRA_ROOTS / extra_roots) is not an existing absolute folder")
        found.append(os.path.realpath(text))
    return tuple(found)


@dataclass(frozen=True)
class RunSwitches:
    """What a run does, decided once from the request within the operator's settings."""

    repair_rounds: int | None  # 0: no repair; None: Phase 3's own rule
    rounds_cap: int | None
    enable_import_smoke_check: bool  # the run option ``tools/api_test.runtime_enabled`` reads (``services["run_options"]``)
    shell_runbook: bool


def run_switches(request: RunRequest, operator: OperatorSettings) -> RunSwitches:
    """A request narrows the operator's switches, never widens them: repair and the runtime probes
    run only when both allow, and a round count above the operator's cap gets the cap."""
    repair = operator.auto_fix and request.auto_fix is not False
    rounds = request.repair_rounds if repair else 0
    return RunSwitches(
        repair_rounds=rounds, rounds_cap=operator.max_repair_rounds,
        enable_import_smoke_check=operator.import_smoke_check and request.enable_import_smoke_check is not False,
        shell_runbook=operator.shell_runbook,
    )
