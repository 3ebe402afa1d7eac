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


def installed(name: str, paths: Sequence[str | Path]) -> Distribution | None:
    """Distribution ``name`` as found first on ``paths`` (None: not installed there)."""
    for found in Distribution.discover(name=canonicalize_name(name), path=[str(p) for p in paths]):
        if found.metadata["Version"]:
            return found
    return None


def plan_for(requirements: Sequence[Requirement]) -> EnvPlan:
    """Each requirement checked against the server's site folders: its version range, and the
    packages its extras add (``pydantic[email]`` needs email-validator too)."""
    paths = server_paths()
    provided: list[Provided] = []
    missing: list[Requirement] = []
    wrong: list[tuple[Requirement, str]] = []
    for requirement in requirements:
        found = installed(requirement.name, paths)
        if found is None:
            missing.append(requirement)
            continue
        version = str(found.metadata["Version"])
        if not _within(requirement, version):
            missing.append(requirement)
            wrong.append((requirement, version))
        elif requirement.extras and not _extras_met(found, requirement.extras, paths):
            missing.append(requirement)
        else:
            provided.append(Provided(canonicalize_name(requirement.name), version, "server"))
    return EnvPlan(tuple(provided), tuple(missing), tuple(wrong))


def _extras_met(found: Distribution, extras: set[str], paths: Sequence[str | Path]) -> bool:
    for line in found.requires or ():
        try:
            needed = Requirement(line)
        except ValueError:
            continue
        if needed.marker is None or not any(needed.marker.evaluate({"extra": extra}) for extra in extras):
            continue  # not one of the asked extras' packages
        dependency = installed(needed.name, paths)
        if dependency is None or not _within(needed, str(dependency.metadata["Version"])):
            return False
    return True


def _within(requirement: Requirement, version: str) -> bool:
    try:
        return requirement.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return not str(requirement.specifier)
