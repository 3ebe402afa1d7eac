"""The chapter-5 experiments, in-process and through the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernel_ext.scenarios import side_effects


@pytest.mark.parametrize("name", side_effects.SCENARIOS)
def test_scenario_behaves_as_the_chapter_says(name):
    lines: list[str] = []
    outcome = side_effects.run(name, out=lines.append)
    assert outcome.passed, "\n".join(lines)
    assert all(ok for _, ok in outcome.checks)
    assert any("observation:" in line for line in lines)


def test_stale_input_observation_is_printed_and_exit_is_zero():
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_ext", "scenario", "side-effects", "--scenario", "stale-input"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "error [stale_input]" in proc.stdout
    assert "behaved as expected" in proc.stdout


def test_checks_can_fail(monkeypatch):
    """A boundary that skipped the recheck would fail the stale-input scenario."""
    from kernel_ext.boundary import executor as executor_module

    monkeypatch.setattr(executor_module.Executor, "_recheck", lambda self, files, when: None)
    outcome = side_effects.run("stale-input", out=lambda line: None)
    assert not outcome.passed
