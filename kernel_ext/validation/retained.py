"""Named scenarios retained for the run, their last reports, and replays after source changes.

A named scenario is an obligation: it is replayed whenever the backend's source changed
since it last ran, and while it fails the run cannot complete. Its definition may only be
changed with a ``correction_reason`` (a generated assertion can be wrong, but rewriting it
must not be a way to make correct behaviour regress silently); every correction is kept.
Credential values of every definition are remembered (never shown) so every view of the
run's scenarios can be redacted with them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.validation.request_report import ScenarioReport, build_report
from kernel_ext.validation.scenario import RequestSpec, credential_values, definition_digest

if TYPE_CHECKING:  # the host is built on demand (its module imports the sandbox's worker)
    from kernel_ext.validation.apphost.host import AppHost, PendingJob
    from kernel_ext.validation.staging import Source

MAX_RETAINED = 10
STORE_KEY = "api_test.scenarios"
SCENARIO_TIMEOUT_S = 60.0


@dataclass
class Retained:
    scenario_id: str
    name: str | None
    requests: list[RequestSpec]
    backend: str | None
    digest: str
    created_at: float = field(default_factory=time.time)
    corrections: list[dict[str, Any]] = field(default_factory=list)
    last_report: ScenarioReport | None = None
    runs: int = 0

    @property
    def failing(self) -> bool:
        return self.last_report is not None and not self.last_report.passed

    def stale(self, source_digest: str) -> bool:
        return self.last_report is None or self.last_report.source_digest != source_digest


class ScenarioStore:
    """The run's retained scenarios (in ``RunState`` under ``STORE_KEY``). Thread-safe."""

    def __init__(self) -> None:
        self.scenarios: dict[str, Retained] = {}
        self.credentials: set[str] = set()
        self.lock = threading.RLock()

    def known(self) -> tuple[str, ...]:
        return tuple(self.credentials)

    def remember(self, requests: list[RequestSpec]) -> None:
        with self.lock:
            self.credentials |= credential_values(requests)

    def get(self, scenario_id: str) -> Retained:
        found = self.scenarios.get(scenario_id)
        if found is None:
            names = ", ".join(sorted(self.scenarios)) or "none yet"
            raise ToolFailure(ErrorCode.NOT_FOUND, f"no retained scenario {scenario_id!r} (retained: {names})")
        return found

    def save(self, scenario_id: str, name: str | None, requests: list[RequestSpec], backend: str | None,
             correction_reason: str | None) -> Retained:
        """Retain a new definition, or change one (only with a reason); an identical one is kept."""
        digest = definition_digest(requests, backend)
        with self.lock:
            self.remember(requests)
            existing = self.scenarios.get(scenario_id)
            if existing is None:
                if len(self.scenarios) >= MAX_RETAINED:
                    raise ToolFailure(ErrorCode.TOO_MANY_SCENARIOS, f"a run retains at most {MAX_RETAINED} scenarios; "
                                      "replay or correct an existing one (action='list' shows them)")
                existing = Retained(scenario_id, name, list(requests), backend, digest)
                self.scenarios[scenario_id] = existing
                return existing
            if existing.digest == digest:
                return existing
            reason = (correction_reason or "").strip()
            if not reason:
                raise ToolFailure(ErrorCode.CORRECTION_REQUIRED,
                                  f"scenario {scenario_id!r} is retained with other requests or expectations; changing it needs "
                                  "correction_reason (why the saved definition is wrong). Without a reason, replay it with "
                                  "only scenario_id, or use a new scenario_id.",
                                  {"scenario_id": scenario_id})
            existing.corrections.append({"reason": reason, "at": time.time(), "previous_digest": existing.digest,
                                         "previous_requests": [r.shown(self.known()) for r in existing.requests]})
            existing.requests, existing.backend, existing.digest = list(requests), backend, digest
            existing.name = name or existing.name
            existing.last_report = None
            return existing

    def record(self, scenario_id: str, report: ScenarioReport) -> None:
        with self.lock:
            found = self.scenarios.get(scenario_id)
            if found is not None:
                found.last_report = report
                found.runs += 1

    def failing(self) -> list[str]:
        return [sid for sid, s in self.scenarios.items() if s.failing]

    def shown(self, scenario_id: str) -> dict[str, Any]:
        """Exact inputs, expectations and the last report, credentials redacted (``action='get'``)."""
        s = self.get(scenario_id)
        known = self.known()
        return {
            "scenario_id": s.scenario_id, "name": s.name, "backend": s.backend, "runs": s.runs,
            "requests": [r.shown(known) for r in s.requests],
            "corrections": [{k: v for k, v in c.items()} for c in s.corrections],
            "last_report": s.last_report.for_widget() if s.last_report else None,
        }

    def listing(self, source_digest: str | None = None) -> list[dict[str, Any]]:
        out = []
        for sid, s in self.scenarios.items():
            state = "never run" if s.last_report is None else ("passed" if s.last_report.passed else "failed")
            item = {"scenario_id": sid, "name": s.name, "requests": len(s.requests), "last": state, "runs": s.runs,
                    "corrections": len(s.corrections)}
            if source_digest is not None:
                item["stale"] = s.stale(source_digest)
            out.append(item)
        return out


def scenario_store(state: Any) -> ScenarioStore:
    return state.store(STORE_KEY, ScenarioStore)


def failing_scenarios(state: Any) -> list[str]:
    """Ids of retained scenarios whose latest run failed (replay first when the source changed)."""
    return scenario_store(state).failing()


# -- running ----------------------------------------------------------------------------------------


def run_requests(host: AppHost, source: Source, requests: list[RequestSpec], *, scenario_id: str | None, name: str | None,
                 known: tuple[str, ...], timeout: float = SCENARIO_TIMEOUT_S) -> ScenarioReport:
    """Run ``requests`` once against ``source`` in a fresh child of ``host``."""
    started = time.perf_counter()
    future = submit(host, source, requests)
    return finish(host, future, source, scenario_id=scenario_id, name=name, known=known, started=started)


def submit(host: AppHost, source: Source, requests: list[RequestSpec], timeout: float = SCENARIO_TIMEOUT_S) -> PendingJob:
    staged = host.stage(source)
    return host.submit(staged, {"kind": "scenario", "requests": [r.wire() for r in requests]}, timeout)


def finish(host: AppHost, future: PendingJob, source: Source, *, scenario_id: str | None, name: str | None,
           known: tuple[str, ...], started: float) -> ScenarioReport:
    reply = host.wait(future)
    notes = [*getattr(host, "notes", ()), *(f"not copied: {s}" for s in source.skipped)]
    return build_report(reply, scenario_id=scenario_id, name=name, backend=source.backend.describe(), digest=source.digest,
                        known_secrets=known, sandbox=getattr(host, "tier", ""), network=getattr(host, "network", False),
                        notes=notes, total_ms=(time.perf_counter() - started) * 1000)


def replay(store: ScenarioStore, host: AppHost, source: Source, *, force: bool = False, parallel: int = 2,
           only: list[str] | None = None) -> dict[str, ScenarioReport]:
    """Replay the retained scenarios (``only`` these ids) whose last run is older than ``source``.

    ``force`` replays them even when they ran on this source; ``parallel`` children at a time.
    """
    chosen = [store.scenarios[i] for i in only if i in store.scenarios] if only is not None else list(store.scenarios.values())
    due = [s for s in chosen if force or s.stale(source.digest)]
    reports: dict[str, ScenarioReport] = {}
    window: list[tuple[Retained, PendingJob, float]] = []
    queue = list(due)
    while queue or window:
        while queue and len(window) < max(1, parallel):
            item = queue.pop(0)
            window.append((item, submit(host, source, item.requests), time.perf_counter()))
        item, future, started = window.pop(0)
        report = finish(host, future, source, scenario_id=item.scenario_id, name=item.name, known=store.known(), started=started)
        store.record(item.scenario_id, report)
        reports[item.scenario_id] = report
    return reports
