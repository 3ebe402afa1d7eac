"""Operator configuration of the shell: read from the environment once, overridable in code.

Shell tools are arbitrary code execution on the host, so turning them on is an operator
decision taken at start-up (``BESSER_LLM_ENABLE_SHELL_TOOLS=1``) or by a library caller's
explicit argument. Nothing a request or a model says reaches this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from kernel_ext.sandbox.netns import MODES as NETWORK_MODES
from kernel_ext.sandbox.netns import parse_mode

ENABLE_VAR = "BESSER_LLM_ENABLE_SHELL_TOOLS"
POLICY_VAR = "BESSER_SANDBOX"
IDLE_VAR = "BESSER_LLM_SHELL_SESSION_IDLE_SECONDS"
MAX_SESSIONS_VAR = "BESSER_LLM_SHELL_SESSION_MAX"
NETWORK_VAR = "BESSER_LLM_SHELL_NETWORK"
PROGRAMS_VAR = "BESSER_LLM_SHELL_ALLOWED_PROGRAMS"

POLICIES = ("auto", "bwrap", "landlock", "off")
_TRUE = frozenset({"1", "true", "yes", "on"})


def env_flag(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


@lru_cache(maxsize=1)
def _enabled_at_startup() -> bool:
    return env_flag(os.environ.get(ENABLE_VAR))


def shell_tools_enabled(explicit: bool | None = None) -> bool:
    """The operator's decision: an explicit library argument wins, else the start-up environment.

    The environment is read once per process (the first call), so a variable set later by
    code that runs inside the server cannot switch shell tools on.
    """
    if explicit is not None:
        return bool(explicit)
    return _enabled_at_startup()


@dataclass(frozen=True)
class ShellSettings:
    """How the shell behaves on this server (operator-owned, fixed at start-up)."""

    policy: str = "auto"
    idle_seconds: float = 900.0
    max_sessions: int = 10
    session_network: bool = True
    allowed_programs: frozenset[str] | None = None
    # off / private (its own namespace and loopback, outbound through pasta) / host (the server's
    # network: the operator's explicit choice). ``session_network=False`` means off.
    network_mode: str = "private"

    def __post_init__(self) -> None:
        if self.network_mode not in NETWORK_MODES:
            raise ValueError(f"shell network {self.network_mode!r} is not one of {', '.join(NETWORK_MODES)}")
        if not self.session_network or self.network_mode == "off":
            object.__setattr__(self, "session_network", False)
            object.__setattr__(self, "network_mode", "off")
        if self.policy not in POLICIES:
            raise ValueError(f"sandbox policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        if self.max_sessions < 0 or self.idle_seconds < 0:
            raise ValueError("max_sessions and idle_seconds must not be negative")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ShellSettings:
        env = os.environ if environ is None else environ
        programs = env.get(PROGRAMS_VAR, "").strip()
        mode = parse_mode(env.get(NETWORK_VAR, "private"))
        return cls(
            policy=(env.get(POLICY_VAR, "auto").strip().lower() or "auto"),
            idle_seconds=float(env.get(IDLE_VAR, "900") or 900),
            max_sessions=int(env.get(MAX_SESSIONS_VAR, "10") or 10),
            session_network=mode != "off",
            network_mode=mode,
            allowed_programs=frozenset(p.strip() for p in programs.split(",") if p.strip()) if programs else None,
        )


@lru_cache(maxsize=1)
def startup_settings() -> ShellSettings:
    """The settings of this process, from the environment at first use."""
    return ShellSettings.from_environment()
