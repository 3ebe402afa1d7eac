"""What validation found, in one shape for Phase 1's checks, Phase 3, the tools, events and the final report.

A ``ValidationReport`` ranks trees: (app boots) then (entities it cannot create) then
(actions it cannot run) then (blocker count), lower is better. Completion is never reported
over an observed start-up or create failure (``runtime_failure``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SEVERITIES = ("blocker", "warning", "info")


@dataclass(frozen=True)
class Finding:
    severity: str  # "blocker" | "warning" | "info"
    source: str  # which validator: "ruff", "import", "startup", "create", "frontend", ...
    message: str
    path: str | None = None
    line: int | None = None
    code: str = ""  # stable finding code ("undefined_name", "startup_failed", "create_failed", ...)

    def as_event(self) -> dict[str, Any]:
        return {"severity": self.severity, "source": self.source, "message": self.message, "path": self.path, "line": self.line}


@dataclass(frozen=True)
class ValidationReport:
    findings: tuple[Finding, ...] = ()
    boots: bool | None = None  # None: nothing to boot (no backend) or not probed
    cannot_create: tuple[str, ...] = ()
    cannot_run: tuple[str, ...] = ()

    @property
    def blockers(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "blocker")

    def rank(self) -> tuple[int, int, int, int]:
        """Lower is better."""
        return (1 if self.boots is False else 0, len(self.cannot_create), len(self.cannot_run), len(self.blockers))

    def runtime_failure(self) -> bool:
        """An observed start-up or create failure: completion must never be reported over it."""
        return self.boots is False or bool(self.cannot_create)

    def merged(self, other: ValidationReport) -> ValidationReport:
        """Two validators' reports as one (a boot failure anywhere is a boot failure)."""
        boots = None if self.boots is None and other.boots is None else not (self.boots is False or other.boots is False)
        return ValidationReport(
            self.findings + other.findings,
            boots,
            self.cannot_create + other.cannot_create,
            self.cannot_run + other.cannot_run,
        )
