"""Model-supplied regular expressions cannot stall the process: RE2, or a named refusal.

The class: every tool argument that becomes a regular expression (``search_in_files``'s
``pattern``, ``sh_detail``'s ``match``, ``sh_run``'s ``expect.stdout_matches``). Each is
driven through the real Executor (the Python API) and the ``python -m kernel_ext tool`` CLI;
REST runs the same cases inside a hosted run in ``test_sec_loop_lag.py``, which also measures
the server's event-loop lag while they run. Each case: the catastrophic pattern answers
(correctly), unsupported features and over-long patterns are refused by name, a refused
``expect`` ran nothing, and nothing outside the run changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sandbox_fixtures import tier_param

from kernel_ext.boundary import ToolCall

from .regex_cases import (
    DETAIL_MATCHES,
    EXPECTS,
    HAYSTACK,
    HAYSTACK_FILE,
    MARKER,
    SEARCHES,
    check_detail,
    check_expect,
    check_search,
    expect_command,
    print_haystack,
)
from .world import World, shell_executor

REPO = Path(__file__).resolve().parents[2]
BWRAP = tier_param("bwrap")


class ApiEntry:
    """The Python API: the real Executor with the operator-enabled shell."""

    def __init__(self, world: World, registry):
        self.executor = shell_executor(world, registry, "bwrap")

    def __call__(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str | None, str, dict[str, Any]]:
        result = self.executor.execute_sync(ToolCall("sec-re", name, arguments))
        return result.ok, result.error.code if result.error else None, result.observation, dict(result.data)


class CliEntry:
    """``python -m kernel_ext tool``: one process per call, shell on by the operator's switch."""

    def __init__(self, world: World, registry):
        self.ws = world.ws

    def __call__(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str | None, str, dict[str, Any]]:
        argv = [sys.executable, "-m", "kernel_ext", "tool", "--workspace", str(self.ws), "--enable-shell",
                "--allow", "shell", "--approve", "yes", name, json.dumps(arguments)]
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
        assert proc.stdout, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        out = json.loads(proc.stdout)
        return out["ok"], (out.get("error") or {}).get("code"), out["observation"], out.get("data") or {}


ENTRIES = {"api": ApiEntry, "cli": CliEntry}


@pytest.fixture(params=list(ENTRIES))
def entry(request, world, registry):
    (world.ws / HAYSTACK_FILE).write_text(HAYSTACK)
    world.snapshot()
    return ENTRIES[request.param](world, registry)


@pytest.mark.parametrize("label,arguments,code", SEARCHES, ids=[c[0] for c in SEARCHES])
def test_search_patterns_run_in_linear_time_or_are_refused_by_name(world, entry, label, arguments, code):
    ok, error_code, _, data = entry("search_in_files", arguments)
    check_search(label, code, ok, error_code, data)
    assert world.unchanged()


@pytest.mark.parametrize("policy", [BWRAP])
def test_sh_detail_match_runs_in_linear_time_or_is_refused_by_name(world, entry, policy):
    ok, error_code, observation, data = entry("sh_run", {"command": print_haystack()})
    assert ok, observation
    for label, pattern, code in DETAIL_MATCHES:
        ok, error_code, _, detail = entry("sh_detail", {"id": data["id"], "selector": "stdout", "match": pattern})
        check_detail(label, code, ok, error_code, detail)
    assert world.unchanged()


@pytest.mark.parametrize("policy", [BWRAP])
@pytest.mark.parametrize("label,pattern,code", EXPECTS, ids=[c[0] for c in EXPECTS])
def test_expect_stdout_matches_runs_in_linear_time_or_is_refused_by_name(world, entry, policy, label, pattern, code):
    ok, error_code, observation, _ = entry("sh_run", {"command": expect_command(label), "expect": {"stdout_matches": pattern}})
    check_expect(label, code, ok, error_code, observation)
    if code == "invalid_argument":
        assert not (world.ws / MARKER).exists(), "a refused expectation must not run its command"
    assert world.unchanged()


def test_the_engine_is_linear_and_lazily_imported():
    """The module names RE2 as its engine and does not import it until a pattern is compiled."""
    code = ("import sys, kernel_ext.safe_regex as s, kernel_ext.tools.search, kernel_ext.sandbox.shtools.views; "
            "assert 're2' not in sys.modules; m = s.compile_untrusted(r'^(\\w|\\w)*!'); "
            "assert 're2' in sys.modules and m.search('a' * 40) is None and m.search('ab!') is not None")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
