"""A card's event -> its DOM in a real browser: ms from ``approval_requested`` to the open card on screen.

    PYTHONPATH=. python bench/bench_browser_card.py [--from-artifacts]

Runs the browser tests (tests/test_browser.py on JupyterLab + ipykernel 7, notebook 01;
tests/test_browser_controls.py, notebook 02) with Playwright + Chromium. In those tests an init
script's MutationObserver stamps, in wall-clock ms (``performance.timeOrigin + performance.now()``),
the moment each card first shows in a view's ``.besser-pending`` region; the test subtracts the
card's ``approval_requested`` ``ts`` from the run's ``events.jsonl`` (same machine, same clock) and
saves the samples as ``tests/artifacts/browser/<setup>/card-latency.json``. The path measured:
the run's event log -> the server's SSE -> the kernel's follower -> ``RunView`` -> comm -> the
widget's DOM. Notebook 01's cards auto-approved by ``--approve edits`` count too (each shows
briefly before its decision folds it). ``--from-artifacts`` reads the last saved samples instead
of running the browser (the tests take minutes).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, figure

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts" / "browser"
SETUPS = {  # artifact folder -> (what it is, the pytest selection that writes it)
    "lab-ipykernel7": ("notebook 01, JupyterLab", ["tests/test_browser.py", "-k", "lab-ipykernel7"]),
    "lab-ipykernel7-02": ("notebook 02, JupyterLab", ["tests/test_browser_controls.py"]),
}


def run_browser_tests() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for _, selection in SETUPS.values():
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *selection],
                       cwd=ROOT, env=env, check=True)


def samples(folder: str) -> list[float]:
    path = ARTIFACTS / folder / "card-latency.json"
    return json.loads(path.read_text())["samples"] if path.exists() else []


def main() -> None:
    if "--from-artifacts" not in sys.argv:
        run_browser_tests()
    figures, everything = [], []
    for folder, (label, _) in SETUPS.items():
        values = samples(folder)
        everything += values
        if values:
            print(f"{label}: {len(values)} cards, median {statistics.median(values):.0f} ms, max {max(values):.0f} ms")
            figures.append(figure(f"card event -> DOM, {label}", values, "ms", group="browser"))
    if not everything:
        sys.exit("no card-latency.json under tests/artifacts/browser: run without --from-artifacts")
    figures.append(figure("card event -> DOM, all cards (Chromium)", everything, "ms", group="browser",
                          note="approval_requested ts -> first MutationObserver sight of the open card"))
    emit(figures)


if __name__ == "__main__":
    main()
