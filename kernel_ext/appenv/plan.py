"""Which of an app's requirements this server's interpreter already meets, and which it does not.

The app host runs the server's interpreter with ``-I``: it sees the interpreter's site folders
(never the user's site, never a working folder). Installed distributions are looked up there,
and in any folders layered over them (an overlay), so the answer is what the app will import.
"""

from __future__ import annotations

import site
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import Distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class Provided:
    """A requirement met: the distribution, its version, and where it comes from ("server", "app env")."""

    name: str
    version: str
    where: str

    def label(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True)
class EnvPlan:
    provided: tuple[Provided, ...]
    missing: tuple[Requirement, ...]
    wrong_version: tuple[tuple[Requirement, str], ...] = ()  # installed, but outside the asked range

    @property
    def satisfied(self) -> bool:
        return not self.missing


def server_paths() -> list[str]:
    """The site folders the app host's interpreter imports from (``-I``: no user site)."""
    paths = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    # A venv's own site folder, and folders a .pth file added (an editable install's, for one).
    paths += [p for p in sys.path if p and ("site-packages" in p or p.endswith("dist-packages"))]
    return list(dict.fromkeys(paths))


def installed_version(name: str, paths: Sequence[str | Path]) -> str | None:
    """The version of distribution ``name`` found first on ``paths`` (None: not installed there)."""
    wanted = canonicalize_name(name)
    for found in Distribution.discover(name=wanted, path=[str(p) for p in paths]):
        version = found.metadata["Version"]
        if version:
            return str(version)
    return None


def plan_for(requirements: Sequence[Requirement], layers: Sequence[tuple[str, Sequence[str | Path]]] = ()) -> EnvPlan:
    """Each requirement checked against ``layers`` (first match wins), then the server's site folders."""
    search = [*layers, ("server", server_paths())]
    provided: list[Provided] = []
    missing: list[Requirement] = []
    wrong: list[tuple[Requirement, str]] = []
    for requirement in requirements:
        for where, paths in search:
            version = installed_version(requirement.name, paths)
            if version is None:
                continue
            if _within(requirement, version):
                provided.append(Provided(canonicalize_name(requirement.name), version, where))
            else:
                missing.append(requirement)
                wrong.append((requirement, version))
            break
        else:
            missing.append(requirement)
    return EnvPlan(tuple(provided), tuple(missing), tuple(wrong))


def _within(requirement: Requirement, version: str) -> bool:
    try:
        return requirement.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return not str(requirement.specifier)
