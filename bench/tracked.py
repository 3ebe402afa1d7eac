"""The figures an open issue is closed on, so ``RESULTS.md`` shows each one with its target in one place.

Issue 32 (H4) is done when ``make bench`` shows each of its figures with its target and every
miss carries a measured reason. Each entry names the issue's item and the figure's group and name
as its script emits them; ``report.py`` lists them first, says which are missed and why, and
names any the record does not hold (a script not run, or a figure renamed: a test keeps these
names equal to what the scripts emit).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tracked:
    item: str
    group: str
    figure: str
    target: str  # as the issue states it; the row's own target (set by its script) is what is judged


ISSUE = "Issue 32 (H4): cost that stays flat as models and classes grow"
FIGURES = (
    Tracked("1 Phase 1 checks, library", "phase1", "Phase 1 output checks library (5)", "<= 0.5 s"),
    Tracked("1 Phase 1 checks, 200 classes", "phase1", "Phase 1 output checks 200 classes", "<= 2 s"),
    Tracked("2 Phase 1 cache, 30 students one model: p95", "phase1", "class of 30: Phase 1 p95, cache on",
            "before (cache off) / after"),
    Tracked("2 Phase 1 cache, 30 students one model: CPU per run", "phase1", "class of 30: Phase 1 CPU per run, cache on",
            "before (cache off) / after"),
    Tracked("3 a class of 30: run time p95", "concurrency", "N=30: run time p95", "<= 60 s"),
    Tracked("3 a class of 30: GET config p95", "concurrency", "N=30: GET config p95", "<= 100 ms"),
    Tracked("3 a class of 30: CPU seconds per run", "concurrency", "N=30: CPU seconds per run", "reported (the floor)"),
    Tracked("4 test_api cold, host started by the call", "test_api", "test_api cold, host started by the call",
            ">= 3x faster than BESSER's probe"),
    Tracked("5 search_in_files, common pattern", "search", "search common: search_in_files via Executor", "<= 4x bare rg"),
    Tracked("6 session round trip", "shell", "session round trip 'true'", "<= 1.2x a bare subprocess"),
    Tracked("6 first command of a new session", "shell", "first command of a new session", "<= 10 ms"),
    Tracked("6 first command, private network", "shell", "first command of a new session, network private", "<= 20 ms"),
)
