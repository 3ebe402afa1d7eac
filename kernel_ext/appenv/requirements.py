"""Reading an app's ``requirements.txt``: the requirements it names and the lines it may not use.

The file is written by the generator or the model, so it is bounded and read strictly. Lines
that would steer *where* packages come from (``--index-url``, ``--find-links``, direct URLs,
nested ``-r`` files, editable installs) are the operator's decision, never the app's: they are
listed as unusable and ignored. Markers are evaluated for this interpreter. A line the reader
cannot parse or evaluate (a malformed marker, specifier, extra or URL, a comparison the marker
grammar cannot decide) is *invalid*: pip would reject the whole file, so the app's environment is
refused by name (``requirements_invalid``, each line quoted), never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

MAX_BYTES = 64 * 1024
MAX_REQUIREMENTS = 200
MAX_LINE_CHARS = 2_000  # past this a line is invalid unread (the marker grammar is recursive)
ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".egg")


@dataclass(frozen=True)
class Listed:
    """What a ``requirements.txt`` asks for: requirements that apply here, and refused lines with why."""

    requirements: tuple[Requirement, ...] = ()
    unusable: tuple[tuple[str, str], ...] = ()  # (line, reason): the operator's to decide, ignored
    invalid: tuple[tuple[str, str], ...] = ()  # (line, reason): not a requirement the reader can evaluate


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
    invalid: list[tuple[str, str]] = []
    for raw in text[:MAX_BYTES].splitlines():
        line = _strip_comment(raw).strip()
        if not line:
            continue
        reason = _refusal(line)
        if reason is not None:
            unusable.append((line[:200], reason))
            continue
        try:
            requirement, applies = _evaluated(line)
        except _Invalid as exc:
            invalid.append((line[:200], exc.reason))
            continue
        if requirement.url:
            unusable.append((line[:200], "a direct URL: packages come only from the operator's sources"))
        elif not applies:
            continue  # its marker is for another platform or Python
        elif len(requirements) >= MAX_REQUIREMENTS:
            unusable.append((line[:200], f"more than {MAX_REQUIREMENTS} requirements: the rest are not read"))
        else:
            key = canonicalize_name(requirement.name)
            if key in requirements:  # two lines for one package: both constraints hold
                requirement = _joined(requirements[key], requirement)
            requirements[key] = requirement
    return Listed(tuple(requirements.values()), tuple(unusable), tuple(invalid))


class _Invalid(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _evaluated(line: str) -> tuple[Requirement, bool]:
    """``line`` as a requirement, its marker evaluated for this interpreter (and dropped), with
    whether it applies here. Every way the parser or the marker's evaluation can fail (packaging
    raises ValueError subclasses; a deeply nested marker a RecursionError) is ``_Invalid``."""
    if len(line) > MAX_LINE_CHARS:
        raise _Invalid(f"longer than {MAX_LINE_CHARS} characters: not read")
    try:
        requirement = Requirement(line)
        applies = requirement.marker is None or requirement.marker.evaluate({"extra": ""})
        requirement.marker = None
        Requirement(str(requirement))  # what is kept must read back (it is joined, keyed and written again)
    except InvalidRequirement as exc:
        raise _Invalid(f"not a requirement: {_first_line(exc)}") from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise _Invalid(f"cannot be evaluated: {_first_line(exc)}") from None
    return requirement, applies


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:120]


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
