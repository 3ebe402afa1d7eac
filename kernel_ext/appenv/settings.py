"""The operator's switches for the app's environment (read at each build, from the server's environment).

- ``BESSER_APP_WHEELHOUSE``: a folder of wheels the overlay may be built from (read-only, offline);
- ``BESSER_APP_ENV_NETWORK``: ``1`` lets the build reach the package index pip is configured with;
- ``BESSER_APP_ENV_CACHE``: where overlays are kept (default ``$XDG_CACHE_HOME/besser-agent/app-envs``);
- ``BESSER_APP_ENV_BUILD_SECONDS`` / ``BESSER_APP_ENV_MAX_MB``: one build's time and size limits.

A request or a model never sets these: they decide what may enter the machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernel_ext.sandbox import env_flag

WHEELHOUSE_ENV = "BESSER_APP_WHEELHOUSE"
NETWORK_ENV = "BESSER_APP_ENV_NETWORK"
CACHE_ENV = "BESSER_APP_ENV_CACHE"
BUILD_SECONDS_ENV = "BESSER_APP_ENV_BUILD_SECONDS"
MAX_MB_ENV = "BESSER_APP_ENV_MAX_MB"
DEFAULT_BUILD_SECONDS = 600.0
DEFAULT_MAX_MB = 1024


@dataclass(frozen=True)
class AppEnvSettings:
    cache: Path
    wheelhouse: Path | None = None
    network: bool = False
    build_seconds: float = DEFAULT_BUILD_SECONDS
    max_bytes: int = DEFAULT_MAX_MB * 1024 * 1024

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> AppEnvSettings:
        env = os.environ if environ is None else environ
        base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        wheelhouse = env.get(WHEELHOUSE_ENV) or None
        return cls(
            cache=Path(env.get(CACHE_ENV) or Path(base) / "besser-agent" / "app-envs"),
            wheelhouse=Path(wheelhouse) if wheelhouse else None,
            network=env_flag(env.get(NETWORK_ENV)),
            build_seconds=_positive(env.get(BUILD_SECONDS_ENV), DEFAULT_BUILD_SECONDS),
            max_bytes=int(_positive(env.get(MAX_MB_ENV), DEFAULT_MAX_MB) * 1024 * 1024),
        )

    @property
    def can_fetch(self) -> bool:
        """Whether any source is allowed at all (else a missing package is refused at once)."""
        return self.network or self.wheelhouse is not None

    def sources(self) -> str:
        """The allowed sources, in words (for findings and the run's environment line)."""
        named = [f"the wheelhouse {self.wheelhouse}"] if self.wheelhouse is not None else []
        if self.network:
            named.append("the package index")
        return " and ".join(named) or "none (this server fetches no packages for apps)"


def how_to_provide() -> str:
    """What a person can do about a missing package (the same words wherever it is reported)."""
    return (f"the operator can allow a source ({WHEELHOUSE_ENV}=<a folder of wheels>, or {NETWORK_ENV}=1 for the "
            "package index; the build runs in the sandbox and leaves the server's packages alone), or install "
            "the package into the server's environment")


def _positive(value: str | None, default: float) -> float:
    try:
        number = float(value) if value else default
    except ValueError:
        return default
    return number if number > 0 else default
