"""Reading an app's ``requirements.txt``: the requirements it names and the lines it may not use.

The file is written by the generator or the model, so it is bounded and read strictly. Lines
that would steer *where* packages come from (``--index-url``, ``--find-links``, direct URLs,
nested ``-r`` files, editable installs) are the operator's decision, never the app's: they are
listed as unusable and ignored. Markers are evaluated for this interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

MAX_BYTES = 64 * 1024
MAX_REQUIREMENTS = 200
ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".egg")


@dataclass(frozen=True)
class Listed:
    """What a ``requirements.txt`` asks for: requirements that apply here, and refused lines with why."""

    requirements: tuple[Requirement, ...] = ()
    unusable: tuple[tuple[str, str], ...] = ()  # (line, reason)

    def names(self) -> tuple[str, ...]:
        return tuple(canonicalize_name(r.name) for r in self.requirements)


def read_requirements(text: str | bytes | None) -> Listed:
    """Parse ``text`` (``None``: no file, nothing required)."""
    if text is None:
        return Listed()
    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            return Listed(unusable=((f"requirements.txt ({len(text)} bytes)", f"longer than {MAX_BYTES} bytes: not read"),))
        text = text.decode("utf-8", errors="replace")
    requirements: dict[str, Requirement] = {}
    unusable: list[tuple[str, str]] = []
    for raw in text[:MAX_BYTES].splitlines():
        line = _strip_comment(raw).strip()
        if not line:
            continue
        reason = _refusal(line)
        if reason is None:
            try:
                requirement = Requirement(line)
            except InvalidRequirement as exc:
                reason = f"not a requirement: {str(exc).splitlines()[0][:120]}"
            else:
                if requirement.url:
                    reason = "a direct URL: packages come only from the operator's sources"
                elif requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                    continue  # for another platform or Python
                elif len(requirements) >= MAX_REQUIREMENTS:
                    reason = f"more than {MAX_REQUIREMENTS} requirements: the rest are not read"
                else:
                    requirement.marker = None
                    key = canonicalize_name(requirement.name)
                    if key in requirements:  # two lines for one package: both constraints hold
                        requirement = _joined(requirements[key], requirement)
                    requirements[key] = requirement
                    continue
        unusable.append((line[:200], reason))
    return Listed(tuple(requirements.values()), tuple(unusable))


def _strip_comment(line: str) -> str:
    if line.lstrip().startswith("#"):
        return ""
    cut = line.find(" #")
    return line if cut < 0 else line[:cut]


def _refusal(line: str) -> str | None:
    if line.startswith(("-r", "--requirement", "-c", "--constraint")):
        return "a nested requirements file: not followed"
    if line.startswith(("-e", "--editable")):
        return "an editable install: not supported for the app's environment"
    if line.startswith("-"):
        return "an installer option: where packages come from is the operator's choice"
    if "://" in line and "@" not in line:
        return "a URL: packages come only from the operator's sources"
    if "${" in line:
        return "an environment variable: not expanded for an app's requirements"
    if line.split(";")[0].strip().lower().endswith(ARCHIVE_SUFFIXES):
        return "a file name: packages come only from the operator's sources"
    return None


def _joined(first: Requirement, second: Requirement) -> Requirement:
    joined = Requirement(str(first))
    joined.specifier &= second.specifier
    joined.extras |= second.extras
    return joined
