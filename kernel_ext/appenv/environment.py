"""The environment an app runs in: the server's interpreter, its packages, and the app's overlay.

``environment_for`` is the one call the app host makes before it stages source: it reads the
app's ``requirements.txt``, keeps what the server already meets, and puts the rest in a cached
overlay (``overlay.py``), or refuses with one ``requirements_unmet`` naming every package no
allowed source provides. Nothing a run can write is ever mounted into the app or read by the
server as package metadata: the overlay is built by the host in a folder of its own, from the
operator's sources; with shell tools on, an approved ``install_dependencies`` may also build it
from the package index when the operator gave the run's shell the network
(``prepare_for_install``). The answer is remembered per file content, so the check costs nothing
on the next scenario.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kernel_ext.appenv.overlay import BuildFailed, cached_overlay, ensure_overlay, overlay_key
from kernel_ext.appenv.plan import EnvPlan, Provided, plan_for
from kernel_ext.appenv.requirements import Listed, read_requirements
from kernel_ext.appenv.settings import AppEnvSettings, how_to_provide
from kernel_ext.errors import ErrorCode, ToolFailure

MEMO_SIZE = 64


# One package the app runs with; "from" says where it comes from (the server, or the app's own overlay).
PackageDescription = TypedDict("PackageDescription", {"name": str, "version": str, "from": str})


class EnvironmentDescription(TypedDict):
    """For reports and the run's metadata: what the app ran with."""

    interpreter: str
    python: str
    overlay: str | None
    built_s: float | None
    packages: list[PackageDescription]
    ignored_lines: list[str]


@dataclass(frozen=True)
class AppEnvironment:
    """What the app runs with: ``overlay`` (None: the server's packages alone) goes first on its path."""

    interpreter: str
    python: str
    packages: tuple[Provided, ...] = ()
    overlay: Path | None = None
    key: str = ""
    built_s: float | None = None
    unusable: tuple[tuple[str, str], ...] = ()

    @property
    def paths(self) -> tuple[Path, ...]:
        return (self.overlay,) if self.overlay is not None else ()

    def describe(self) -> EnvironmentDescription:
        return {"interpreter": self.interpreter, "python": self.python, "overlay": self.key or None,
                "built_s": self.built_s,
                "packages": [{"name": p.name, "version": p.version, "from": p.where} for p in self.packages],
                "ignored_lines": [f"{line}: {why}" for line, why in self.unusable]}

    def line(self) -> str:
        """One line for the run's timeline."""
        own = [p.label() for p in self.packages if p.where != "server"]
        server = [p.label() for p in self.packages if p.where == "server"]
        parts = [f"the app ran on Python {self.python} ({self.interpreter})"]
        if server:
            parts.append(f"with the server's {', '.join(server)}")
        if own:
            how = f"built in {self.built_s:g} s" if self.built_s is not None else "cached"
            parts.append(f"and its own environment {self.key[:12]} ({how}): {', '.join(own)}")
        if self.unusable:
            parts.append(f"ignoring {len(self.unusable)} requirements line(s): {self.unusable[0][0]} ({self.unusable[0][1]})")
        return "; ".join(parts)


_memo: dict[tuple[str, AppEnvSettings], AppEnvironment] = {}
_memo_lock = threading.Lock()


def environment_for(requirements: str | bytes | None, *, policy: str | None = None,
                    settings: AppEnvSettings | None = None, shell_tools: bool = False) -> AppEnvironment:
    """The environment for an app whose ``requirements.txt`` is ``requirements`` (None: it has none).

    Raises ``ToolFailure(requirements_unmet)`` naming the packages that cannot be provided
    (``shell_tools``: the run may use ``install_dependencies``, and the refusal says so), and
    ``ToolFailure(requirements_invalid)`` quoting the lines that are not requirements at all.
    """
    settings = settings or AppEnvSettings.from_environment()
    data = requirements.encode("utf-8") if isinstance(requirements, str) else (requirements or b"")
    memo_key = (hashlib.sha256(data).hexdigest() + ("" if requirements is not None else "-none"), settings)
    with _memo_lock:
        known = _memo.get(memo_key)
    if known is not None and (known.overlay is None or cached_overlay(settings, known.key) is not None):
        return known  # an overlay is checked again (no-follow, the server's alone) each time it is used
    listed = read_requirements(requirements)
    if listed.invalid:
        raise ToolFailure(ErrorCode.REQUIREMENTS_INVALID, invalid_message(listed),
                          {"invalid": [{"line": line, "reason": why} for line, why in listed.invalid]})
    found = _resolve(listed, settings, policy, shell_tools)
    with _memo_lock:
        if len(_memo) >= MEMO_SIZE:
            _memo.pop(next(iter(_memo)))
        _memo[memo_key] = found
    return found


def prepare_for_install(requirements: str | bytes | None, *, network: bool, policy: str | None = None) -> AppEnvironment:
    """``install_dependencies``' half for the app: the overlay built now, from the operator's sources
    plus the package index when the operator gave the run's shell the network (``network``)."""
    settings = AppEnvSettings.from_environment()
    if network and not settings.network:
        settings = dataclasses.replace(settings, network=True)
    return environment_for(requirements, policy=policy, settings=settings, shell_tools=True)


def _resolve(listed: Listed, settings: AppEnvSettings, policy: str | None, shell_tools: bool) -> AppEnvironment:
    base = AppEnvironment(interpreter=sys.executable, python=sys.version.split()[0], unusable=listed.unusable)
    plan = plan_for(listed.requirements)
    if plan.satisfied:
        return dataclasses.replace(base, packages=plan.provided)
    overlay = cached_overlay(settings, overlay_key(plan.missing))
    if overlay is None:
        if not settings.can_fetch:
            raise ToolFailure(ErrorCode.REQUIREMENTS_UNMET,
                              unmet_message(plan, (), "no package source is allowed", shell_tools=shell_tools),
                              {"missing": [str(r) for r in plan.missing]})
        try:
            overlay = ensure_overlay(plan.missing, settings, policy=policy)
        except BuildFailed as exc:
            why = f"{settings.sources()} could not provide them: {exc.detail}"
            raise ToolFailure(ErrorCode.REQUIREMENTS_UNMET, unmet_message(plan, exc.names, why, shell_tools=shell_tools),
                              {"missing": [str(r) for r in plan.missing], "not_found": list(exc.names)}) from None
    versions = dict(overlay.packages)
    own = tuple(Provided(n, versions.get(n, "?"), "app env") for n in (_name(r) for r in plan.missing))
    return dataclasses.replace(base, packages=plan.provided + own, overlay=overlay.site, key=overlay.key, built_s=overlay.built_s)


def unmet_message(plan: EnvPlan, not_found: tuple[str, ...], why: str, *, shell_tools: bool = False) -> str:
    """One line naming each missing package, why it is missing, and what a person can do."""
    installed = {_name(r): v for r, v in plan.wrong_version}
    named = []
    for requirement in plan.missing:
        if not_found and _name(requirement) not in not_found:
            continue
        have = installed.get(_name(requirement))
        named.append(f"{requirement} ({f'{have} is installed' if have else 'not installed'})")
    also = ("; with shell tools on, install_dependencies (after approval) builds the app's environment, from the "
            "package index too when the operator gave the run's shell the network" if shell_tools else "")
    return (f"the app's requirements.txt needs {', '.join(named) or ', '.join(map(str, plan.missing))}, which this "
            f"server does not provide, and {why}. To run the app: {how_to_provide()}{also}")


def invalid_message(listed: Listed) -> str:
    """One line quoting each requirements line the reader could not evaluate, and why."""
    shown = "; ".join(f"{line!r} ({why})" for line, why in listed.invalid[:5])
    more = f" and {len(listed.invalid) - 5} more" if len(listed.invalid) > 5 else ""
    return (f"the app's requirements.txt has {len(listed.invalid)} line(s) that are not requirements pip could "
            f"read: {shown}{more}. Fix or remove them (pip would refuse the whole file)")


def _name(requirement: Requirement) -> str:
    return canonicalize_name(requirement.name)
