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


ISSUE = "Issue 32 (H4): cost that stays flat as models and classes grow"
FIGURES = (
    Tracked("1 Phase 1 checks, library <= 0.5 s", "phase1", "Phase 1 output checks library (5)"),
    Tracked("1 Phase 1 checks, 200 classes <= 2 s", "phase1", "Phase 1 output checks 200 classes"),
    Tracked("2 Phase 1 cache, 30 students one model: p95 before/after", "phase1", "class of 30: Phase 1 p95, cache on"),
    Tracked("2 Phase 1 cache, 30 students one model: CPU per run before/after", "phase1",
            "class of 30: Phase 1 CPU per run, cache on"),
    Tracked("3 a class of 30: run time p95 <= 60 s", "concurrency", "N=30: run time p95"),
    Tracked("3 a class of 30: GET config p95 <= 100 ms", "concurrency", "N=30: GET config p95"),
    Tracked("3 a class of 30: CPU seconds per run (the floor)", "concurrency", "N=30: CPU seconds per run"),
    Tracked("4 test_api cold, host started by the call, >= 3x faster than BESSER", "test_api",
            "test_api cold, host started by the call"),
    Tracked("5 search_in_files, common pattern, <= 4x bare rg", "search", "search common: search_in_files via Executor"),
    Tracked("6 session round trip <= 1.2x a bare subprocess", "shell", "session round trip 'true'"),
    Tracked("6 first command of a new session <= 10 ms", "shell", "first command of a new session"),
    Tracked("6 first command, private network, <= 20 ms", "shell", "first command of a new session, network private"),
)
