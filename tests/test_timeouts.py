"""A hang is a failure: a test (or its teardown) that never returns fails by name, with a traceback,
within its deadline, and the run goes on.

Each case runs pytest in a subprocess on a small test file, with the project's own settings
(pyproject's ini: the default deadline, asyncio mode) and its deadline plugin (``tests/timeouts.py``).
The teardown case is the shape of the reported hang: a test fails, then its event loop's teardown
waits forever on a task that swallowed its cancellation (pytest-timeout had stopped its timer at the
failure, so the run hung there).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HANGS = '''
import asyncio, threading
import pytest


@pytest.mark.timeout(3)
def test_a_body_that_never_returns():
    threading.Event().wait()  # the hang


@pytest.fixture
async def stubborn_task():
    async def swallow():
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                pass  # ignores cancellation: the loop's teardown waits on it forever
    task = asyncio.ensure_future(swallow())
    yield task


@pytest.mark.timeout(3)
async def test_a_failure_then_a_teardown_that_never_returns(stubborn_task):
    assert False, "the test's own failure"


@pytest.mark.slow
def test_slow_gets_the_long_deadline(request):
    print("DEADLINE", request.node.get_closest_marker("timeout").args)


def test_the_default_deadline(request):
    print("DEFAULT", request.config.getini("timeout"))


def test_the_run_goes_on():
    pass
'''


def test_a_hanging_test_and_a_hanging_teardown_fail_by_name_within_their_deadline(tmp_path):
    (tmp_path / "test_hangs.py").write_text(textwrap.dedent(HANGS))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests"), "COLUMNS": "400"}  # summary lines whole
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), "-p", "timeouts",
         "-p", "no:cacheprovider", "-s", "-q", str(tmp_path / "test_hangs.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,  # the harness's own bound: a hang of the run fails here
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "FAILED test_hangs.py::test_a_body_that_never_returns - Failed: Timeout (>3.0s)" in out, out
    assert "threading.Event().wait()  # the hang" in out  # the traceback shows where it hung
    assert "FAILED test_hangs.py::test_a_failure_then_a_teardown_that_never_returns - AssertionError: the test's own failure" in out
    assert "ERROR test_hangs.py::test_a_failure_then_a_teardown_that_never_returns - Failed: Timeout (>3.0s)" in out, out
    assert "DEADLINE (1200.0,)" in out and "DEFAULT 300" in out
    assert "2 failed, 3 passed, 1 error" in out, out
