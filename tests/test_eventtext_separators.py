"""A timeline line shows a name or a model's line whole, up to a real newline (red team 2, F8).

``str.splitlines`` also ends a line at U+2028, U+2029, U+0085, a form feed or a vertical tab, so
the command line's timeline printed ``write_file ok: created u`` for a file whose name went on
after U+2028: the rest of the name was hidden from the person. Checked through a real CLI run
with a labelled scripted provider (its turn writes such a file and says such a line).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SEPARATORS = ["\u2028", "\u2029", "\x85", "\x0c", "\x0b"]


@pytest.mark.timeout(600)
def test_the_cli_timeline_shows_the_whole_name(tmp_path: Path) -> None:
    calls = [{"name": "write_file", "arguments": {"path": f"u{sep}rest{i}.txt", "content": "x = 1\n"}}
             for i, sep in enumerate(SEPARATORS)]
    turns = [{"text": "", "tool_calls": [{"name": "submit_tasks", "arguments": {"tasks": ["t"]}}]},
             {"text": "said\u2028the tail of the line", "tool_calls": calls},
             {"text": "done"}]
    script = tmp_path / "separators.json"
    script.write_text(json.dumps({"name": "separators", "turns": turns}), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "kernel_ext", "generate", "example:library", "Generate a FastAPI backend",
                           "--out", str(tmp_path / "run"), "--provider", f"scripted:{script}", "--approve", "all"],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    results = [line for line in done.stdout.splitlines() if "<- write_file" in line]
    assert len(results) == len(SEPARATORS), done.stdout[-2000:]
    for i in range(len(SEPARATORS)):
        assert any(f"rest{i}.txt" in line for line in results), (i, results)
    assert any("said" in line and "the tail of the line" in line for line in done.stdout.splitlines())
