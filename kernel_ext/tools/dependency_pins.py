"""Known-incompatible dependency pairs, pinned in ``requirements.txt`` before an install.

Some pairs install cleanly and then break at import or first request (``passlib`` with
``bcrypt`` 4.1+, Flask before 2.3 with Werkzeug 3). When the trigger package is listed and
its partner is missing or allowed to float into the bad range, the partner is pinned, and
every change is reported (``pinned``) so nothing changes silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class PinRule:
    trigger: str
    package: str
    pin: str
    compatible: re.Pattern[str]  # a version spec of ``package`` that is already safe
    reason: str
    trigger_spec: re.Pattern[str] | None = None  # only when the trigger's spec matches


RULES: tuple[PinRule, ...] = (
    PinRule(
        trigger="passlib",
        package="bcrypt",
        pin="bcrypt==4.0.1",
        compatible=re.compile(r"^(==\s*(3\.|4\.0\.)|<\s*4\.1|<=\s*4\.0|~=\s*4\.0\.)"),
        reason="passlib 1.7 reads bcrypt.__about__, which bcrypt 4.1 removed (hashing fails at runtime)",
    ),
    PinRule(
        trigger="flask",
        package="werkzeug",
        pin="werkzeug<3",
        compatible=re.compile(r"^(==\s*[12]\.|<\s*3|<=\s*2\.|~=\s*2\.)"),
        reason="Flask before 2.3 imports werkzeug.urls.url_quote, which Werkzeug 3 removed",
        trigger_spec=re.compile(r"^(==|<=|~=)\s*(0\.|1\.|2\.[0-2]\b)|^<\s*2\.3\b"),
    ),
)

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;#]*)")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _parse(lines: list[str]) -> dict[str, tuple[int, str]]:
    """Package name -> (line index, version spec text) for plain requirement lines."""
    found: dict[str, tuple[int, str]] = {}
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "-")) or "://" in stripped:
            continue
        match = _REQUIREMENT.match(line)
        if match:
            found.setdefault(normalize(match.group(1)), (index, match.group(3).strip()))
    return found


def apply_pins(text: str) -> tuple[str, list[dict[str, str | None]]]:
    """``text`` with the incompatible pairs pinned, and the list of changes made."""
    lines = text.splitlines()
    changes: list[dict[str, str | None]] = []
    for rule in RULES:
        listed = _parse(lines)
        trigger = listed.get(rule.trigger)
        if trigger is None or (rule.trigger_spec is not None and not rule.trigger_spec.search(trigger[1])):
            continue
        current = listed.get(rule.package)
        if current is None:
            lines.append(f"{rule.pin}  # pinned by install_dependencies: {rule.reason}")
            changes.append({"package": rule.package, "from": None, "to": rule.pin, "because": rule.reason})
        elif not rule.compatible.search(current[1]):
            before = lines[current[0]].strip()
            lines[current[0]] = f"{rule.pin}  # pinned by install_dependencies (was: {before}): {rule.reason}"
            changes.append({"package": rule.package, "from": before, "to": rule.pin, "because": rule.reason})
    if not changes:
        return text, []
    return "\n".join(lines) + "\n", changes
