"""The environment an app runs in: the server's interpreter, its packages, and the app's overlay.

``environment_for`` is the one call the app host makes before it stages source: it reads the
app's ``requirements.txt``, keeps what the server already meets, and puts the rest in a cached
overlay (``overlay.py``), or refuses with one ``requirements_unmet`` naming every package no
allowed source provides. With shell tools on, what ``install_dependencies`` put in the run's
shell (``shell_site``) is a layer too, above the server's packages. The answer is remembered
per file content and layer contents, so the check costs nothing on the next scenario.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernel_ext.appenv.overlay import (
    BuildFailed,
    cached_overlay,
    ensure_overlay,
    overlay_key,
)
from kernel_ext.appenv.plan import EnvPlan, Provided, plan_for
from kernel_ext.appenv.requirements import Listed, read_requirements
from kernel_ext.appenv.settings import AppEnvSettings, how_to_provide
from kernel_ext.errors import ErrorCode, ToolFailure

MEMO_SIZE = 64


@dataclass(frozen=True)
class AppEnvironment:
    """What the app runs with: ``paths`` (none: the server's packages alone) go first on its path."""

    interpreter: str
    python: str
    packages: tuple[Provided, ...] = ()
    overlay: Path | None = None
    layers: tuple[Path, ...] = ()  # the run's shell site, when it provides a requirement
    key: str = ""
    built_s: float | None = None
    unusable: tuple[tuple[str, str], ...] = ()

    @property
    def paths(self) -> tuple[Path, ...]:
        return (*self.layers, *((self.overlay,) if self.overlay is not None else ()))

    def describe(self) -> dict[str, Any]:
        return {"interpreter": self.interpreter, "python": self.python, "overlay": self.key or None,
                "built_s": self.built_s, "packages": [{"name": p.name, "version": p.version, "from": p.where} for p in self.packages],
                "ignored_lines": [f"{line}: {why}" for line, why in self.unusable]}

    def line(self) -> str:
        """One line for the run's timeline."""
        own = [p.label() for p in self.packages if p.where == "app env"]
        shell = [p.label() for p in self.packages if p.where == "run shell"]
        server = [p.label() for p in self.packages if p.where == "server"]
        parts = [f"the app ran on Python {self.python} ({self.interpreter})"]
        if server:
            parts.append(f"with the server's {', '.join(server)}")
        if shell:
            parts.append(f"with the run shell's {', '.join(shell)} (install_dependencies)")
        if own:
            how = f"built in {self.built_s:g} s" if self.built_s is not None else "cached"
            parts.append(f"and its own environment {self.key[:12]} ({how}): {', '.join(own)}")
        if self.unusable:
            parts.append(f"ignoring {len(self.unusable)} requirements line(s): {self.unusable[0][0]} ({self.unusable[0][1]})")
        return "; ".join(parts)


_memo: dict[tuple[str, AppEnvSettings, str, tuple[str, ...]], AppEnvironment] = {}
_memo_lock = threading.Lock()


def shell_site(home: Path) -> Path:
    """Where ``install_dependencies`` (pip ``--prefix $HOME/.local``) puts packages in a run's shell."""
    return home / ".local" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def environment_for(requirements: str | bytes | None, *, policy: str | None = None,
                    settings: AppEnvSettings | None = None, shell_home: Path | None = None) -> AppEnvironment:
    """The environment for an app whose ``requirements.txt`` is ``requirements`` (None: it has none).

    ``shell_home``: the run's shell home when shell tools are on (its installed packages are a layer).
    Raises ``ToolFailure(requirements_unmet)`` naming the packages that cannot be provided.
    """
    settings = settings or AppEnvSettings.from_environment()
    data = requirements.encode("utf-8") if isinstance(requirements, str) else (requirements or b"")
    site = shell_site(shell_home) if shell_home is not None else None
    memo_key = (hashlib.sha256(data).hexdigest() + ("" if requirements is not None else "-none"), settings,
                str(shell_home), _contents(site))
    with _memo_lock:
        known = _memo.get(memo_key)
    if known is not None and (known.overlay is None or known.overlay.is_dir()):
        return known
    listed = read_requirements(requirements)
    found = _resolve(listed, settings, policy, site, shell=shell_home is not None)
    with _memo_lock:
        if len(_memo) >= MEMO_SIZE:
            _memo.pop(next(iter(_memo)))
        _memo[memo_key] = found
    return found


def _contents(site: Path | None) -> tuple[str, ...]:
    """What a layer holds, by its distributions' folder names (a new install changes the memo key)."""
    try:
        return tuple(sorted(n for n in os.listdir(site) if n.endswith(".dist-info"))) if site is not None else ()
    except OSError:
        return ()


def _resolve(listed: Listed, settings: AppEnvSettings, policy: str | None, site: Path | None, *, shell: bool) -> AppEnvironment:
    layers = (site,) if site is not None and site.is_dir() else ()
    plan = plan_for(listed.requirements, [("run shell", layers)] if layers else [])
    used = layers if any(p.where == "run shell" for p in plan.provided) else ()
    base = AppEnvironment(interpreter=sys.executable, python=sys.version.split()[0], layers=used, unusable=listed.unusable)
    if plan.satisfied:
        return replace(base, packages=plan.provided)
    overlay = cached_overlay(settings, overlay_key(plan.missing))
    if overlay is None:
        if not settings.can_fetch:
            raise ToolFailure(ErrorCode.REQUIREMENTS_UNMET, unmet_message(plan, (), "no package source is allowed", shell=shell),
                              {"missing": [str(r) for r in plan.missing]})
        try:
            overlay = ensure_overlay(plan.missing, settings, policy=policy)
        except BuildFailed as exc:
            why = f"{settings.sources()} could not provide them: {exc.detail}"
            raise ToolFailure(ErrorCode.REQUIREMENTS_UNMET, unmet_message(plan, exc.names, why, shell=shell),
                              {"missing": [str(r) for r in plan.missing], "not_found": list(exc.names)}) from None
    versions = dict(overlay.packages)
    own = tuple(Provided(n, versions.get(n, "?"), "app env") for n in (_name(r) for r in plan.missing))
    return replace(base, packages=plan.provided + own, overlay=overlay.site, key=overlay.key, built_s=overlay.built_s)


def unmet_message(plan: EnvPlan, not_found: tuple[str, ...], why: str, *, shell: bool = False) -> str:
    """One line naming each missing package, why it is missing, and what a person can do."""
    installed = {_name(r): v for r, v in plan.wrong_version}
    named = []
    for requirement in plan.missing:
        if not_found and _name(requirement) not in not_found:
            continue
        have = installed.get(_name(requirement))
        named.append(f"{requirement} ({f'{have} is installed' if have else 'not installed'})")
    also = ("; with shell tools on, install_dependencies installs them in the run's shell (after approval) and the "
            "app uses them" if shell else "")
    return (f"the app's requirements.txt needs {', '.join(named) or ', '.join(map(str, plan.missing))}, which this "
            f"server does not provide, and {why}. To run the app: {how_to_provide()}{also}")


def _name(requirement: Any) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(requirement.name)
