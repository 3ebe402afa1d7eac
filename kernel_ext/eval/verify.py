"""The verifier harness: named checks over a run's produced tree, and the report they make.

A verifier never reads what the agent said (its text, its task list, its events). It reads:

- the produced tree (``app/``), as files, and as a running app: HTTP scenarios sent by a
  sandboxed app host the *verifier* owns (``validation.apphost``), to a fresh copy of the
  backend with a fresh database per scenario;
- what the host recorded, not the agent: ``run.json``'s ledger of generator-written files
  (``generated``: path -> sha256, written by Phase 1) and the run's end status, which the host
  computes from its own checks. Only the tasks whose request is about the ending (a request the
  scaffold already satisfies, a request impossible on the model) check the status, since the
  honest ending *is* the outcome asked for there.

Each check has a name, says what it proves, and reports passed/failed with why.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernel_ext.validation.apphost.host import AppHost
    from kernel_ext.validation.request_report import ScenarioReport

DETAIL_CHARS = 700


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    why: str  # what the check proves
    detail: str = ""  # on a failure: what was seen instead

    def line(self) -> str:
        mark = "pass" if self.passed else "FAIL"
        return f"[{mark}] {self.name}: {self.why}" + (f" -- {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class VerifierReport:
    task_id: str
    checks: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.passed]

    def to_text(self) -> str:
        state = "PASSED" if self.passed else "FAILED (" + ", ".join(self.failed) + ")"
        return "\n".join([f"{self.task_id}: {state}", *("  " + c.line() for c in self.checks)])

    def as_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "passed": self.passed, "failed": self.failed,
                "checks": [{"name": c.name, "passed": c.passed, "why": c.why, "detail": c.detail} for c in self.checks]}


@dataclass
class Produced:
    """What a run left: its folder, the host's records, and the verifier's own app host."""

    run_dir: Path
    host: AppHost
    model_key: str
    status: str  # the host's end status of the run (``done``), "" when the run left none
    _recipe: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def app_dir(self) -> Path:
        return self.run_dir / "app"

    @property
    def recipe(self) -> dict[str, Any]:
        """``run.json``, written by the host at the run's end (the ledger, the final manifest)."""
        if self._recipe is None:
            path = self.run_dir / "run.json"
            self._recipe = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        return self._recipe

    def text(self, rel: str) -> str | None:
        path = self.app_dir / rel
        try:
            return path.read_text(encoding="utf-8") if path.is_file() and not path.is_symlink() else None
        except (OSError, UnicodeDecodeError):
            return None

    def scenario(self, requests: Sequence[dict[str, Any]], name: str) -> ScenarioReport:
        """``requests`` sent to the produced backend by the verifier's app host (a fresh database)."""
        from kernel_ext.validation.retained import run_requests
        from kernel_ext.validation.scenario import RequestSpec
        from kernel_ext.validation.staging import locate, read_source
        from kernel_ext.workspace import Workspace

        workspace = Workspace(self.app_dir)
        source = read_source(workspace, locate(workspace))
        specs = [RequestSpec.model_validate(r) for r in requests]
        return run_requests(self.host, source, specs, scenario_id=name, name=name, known=())


Outcome = tuple[bool, str]  # passed, and what was seen when it failed


@dataclass(frozen=True)
class Check:
    """One named check: ``run`` looks at what was produced and answers (passed, detail)."""

    name: str
    why: str
    run: Callable[[Produced], Outcome]

    def __call__(self, produced: Produced) -> CheckResult:
        from kernel_ext.errors import ToolFailure

        try:
            passed, detail = self.run(produced)
        except ToolFailure as exc:  # no backend found, requirements unmet...: the check failed, by name
            passed, detail = False, f"{exc.code}: {exc.message}"
        return CheckResult(self.name, passed, self.why, "" if passed else _cut(detail))


def verify(task_id: str, checks: Sequence[Check], produced: Produced) -> VerifierReport:
    return VerifierReport(task_id, tuple(check(produced) for check in checks))


# -- check builders -------------------------------------------------------------------------------


def http(name: str, why: str, requests: Sequence[dict[str, Any]]) -> Check:
    """A scenario against the produced app: every request's status and fields must hold."""

    def run(produced: Produced) -> Outcome:
        report = produced.scenario(requests, name)
        return report.passed, "; ".join(report.failures) or report.summary()

    return Check(name, why, run)


def file_holds(name: str, why: str, rel: str, *needles: str) -> Check:
    """``rel`` exists in the produced tree and holds each of ``needles``."""

    def run(produced: Produced) -> Outcome:
        text = produced.text(rel)
        if text is None:
            return False, f"{rel} does not exist"
        missing = [n for n in needles if n not in text]
        return not missing, f"{rel} lacks {', '.join(repr(n) for n in missing)}"

    return Check(name, why, run)


def status_is(expected: str, why: str) -> Check:
    """The host's end status of the run (computed from its own checks, not the agent's words)."""

    def run(produced: Produced) -> Outcome:
        return produced.status == expected, f"the run ended {produced.status or 'without a status'!r}"

    return Check(f"run_{expected}", why, run)


def _cut(text: str) -> str:
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"
