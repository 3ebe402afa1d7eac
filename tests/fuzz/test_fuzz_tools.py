"""Hypothesis-generated arguments for every tool of the default catalog, through the real Executor.

Arguments come as a model would send them, and worse: dicts with the tool's own field names
holding values of any JSON type, huge strings, odd Unicode (lone surrogates, bidi controls,
combining marks), control characters and paths with NULs, ``..`` and absolute parts; JSON
text of wrong shapes; text that is not JSON at all. Each tool runs with every service it
needs (a small workspace with a link to the outside and a FIFO, a one-class model, a GUI
model, a task list, the sandboxed shell restricted to the program ``true``), so valid
arguments really run. For every example:

- no exception escapes the Executor, and a refusal carries a code of ``ErrorCode`` other
  than ``internal_error`` (which the Executor uses for a tool's own unhandled exception);
- nothing outside the workspace changes, and a refused call leaves the workspace as it was
  (shell tools excepted: a command that ran may write before it fails, which is its record).

Fast by default (a few examples per tool, derandomized); ``--fuzz-long`` for many. Failures
the fuzzer already found are listed in ``known.py``, each reproduced exactly by a strict xfail
in ``test_fuzz_known.py``: the fuzz tolerates only those, so a new failure still fails it, and
a fixed one turns its xfail into a failure that says to remove the entry.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from file_tool_helpers import tree_state
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kernel_ext.boundary import (
    ApprovalPolicy,
    ExecutionPolicy,
    Executor,
    ToolCall,
    always_approve,
)
from kernel_ext.errors import ErrorCode
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import default_catalog

from .known import hangs_the_lexer, known_finding

CATALOG = default_catalog()
NAMED = {str(code) for code in ErrorCode} - {str(ErrorCode.INTERNAL_ERROR)}
FAST_EXAMPLES, LONG_EXAMPLES = 12, 300
SLOW_TOOLS = {name for name in CATALOG.names() if name.startswith("generate_")} | {"validate_app", "test_api"}

# -- strategies ---------------------------------------------------------------------------------

SEGMENTS = ["..", ".", "", "~", "app.py", "sub", "x.txt", "link_out", "fifo", "backend", ".besser", ".git", "/etc",
            "/proc/self/environ", "a\x00b", "\x00", "ü", "\u202e", "\ud800", "CON", " ", "\n", "*", "?", "[", "-rf",
            "%2e%2e", "\\..\\", "a" * 300]
odd_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40),  # surrogates and controls included
    st.text(alphabet=st.sampled_from("\x00\x01\x07\x1b\x7f\u0085\u2028\ufeff\u200b\u0301\U0001f600"), max_size=20),
    st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=6).map("/".join),
    st.builds(lambda piece, n: piece * n, st.text(min_size=1, max_size=4), st.integers(1000, 400_000)),  # huge
)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                         st.floats(allow_nan=True, allow_infinity=True), odd_text)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                  st.dictionaries(odd_text, inner, max_size=4)), max_leaves=12)


def _typed(schema: dict[str, Any]) -> st.SearchStrategy:
    """Values near the declared type (the shape a model is most likely to send), still hostile."""
    kind = schema.get("type")
    if "enum" in schema:
        return st.one_of(st.sampled_from(schema["enum"]), odd_text)
    if kind == "string":
        return odd_text
    if kind == "integer":
        return st.one_of(st.integers(-(2**40), 2**40), st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63)]))
    if kind == "number":
        return st.floats(allow_nan=True, allow_infinity=True)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(st.one_of(odd_text, json_values, st.dictionaries(odd_text, json_values, max_size=5)), max_size=25)
    return json_values


def arguments_for(spec) -> st.SearchStrategy:
    schema = spec.json_schema()
    props = schema.get("properties", {})
    field_values = {name: st.one_of(_typed(_resolve(sub, schema)), json_values) for name, sub in props.items()}
    shaped = (st.fixed_dictionaries({}, optional=field_values) if field_values else st.just({}))
    with_extra = st.builds(lambda d, extra: {**d, **extra}, shaped, st.dictionaries(odd_text, json_values, max_size=2))
    return st.one_of(
        shaped, shaped, shaped, with_extra,
        json_values.map(json.dumps),  # JSON text of any shape
        odd_text,  # not JSON at all
        st.none(),
    )


def _resolve(sub: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in sub:
        return root.get("$defs", {}).get(sub["$ref"].rsplit("/", 1)[-1], {})
    for key in ("anyOf", "oneOf"):
        if key in sub:
            typed = [s for s in sub[key] if s.get("type") != "null"]
            return _resolve(typed[0], root) if typed else {}
    return sub


# -- the world each example runs in ------------------------------------------------------------


def _shell_tier() -> str | None:
    from kernel_ext.sandbox.tiers import choose_tier

    for policy in ("bwrap", "landlock"):
        if choose_tier(policy).available:
            return policy
    return None


def _services(ws: Path, home: Path) -> dict[str, Any]:
    from model_fixtures import minimal_gui_model

    from kernel_ext.model import synthetic_model
    from kernel_ext.tools.task_list import SERVICE, TaskList

    services: dict[str, Any] = {"domain_model": synthetic_model(1), "gui_model": minimal_gui_model(), SERVICE: TaskList()}
    tier = _shell_tier()
    if tier is not None:
        from kernel_ext.sandbox.config import ShellSettings
        from kernel_ext.sandbox.session.service import ShellService

        settings_ = ShellSettings(policy=tier, session_network=False, allowed_programs=frozenset({"true"}))
        services["shell"] = ShellService(ws, run_id="fuzz", enabled=True, home=home, settings=settings_,
                                         deadline=time.monotonic() + 60)
    return services


def _make_world(base: Path) -> tuple[Path, Path, Path]:
    ws, outside, home = base / "ws", base / "outside", base / "home"
    for folder in (ws / "sub", ws / "backend", outside, home):
        folder.mkdir(parents=True)
    (ws / "app.py").write_text("print('hello')\nVALUE = 1\n")
    (ws / "sub" / "x.txt").write_text("inside\n")
    (outside / "secret.txt").write_text("outside\n")
    (ws / "link_out").symlink_to(outside)
    os.mkfifo(ws / "fifo")
    return ws, outside, home


@pytest.fixture(scope="module")
def examples(request) -> int:
    return LONG_EXAMPLES if request.config.getoption("--fuzz-long") else FAST_EXAMPLES


@pytest.mark.parametrize("name", [n for n in CATALOG.names() if n not in SLOW_TOOLS] +
                         [pytest.param(n, marks=pytest.mark.slow) for n in CATALOG.names() if n in SLOW_TOOLS])
def test_generated_arguments_never_crash_a_tool_or_write_outside(name, examples):
    from kernel_ext.workspace import Workspace

    spec = CATALOG.get(name)
    if spec.category is Category.SHELL and _shell_tier() is None:
        pytest.skip("no sandbox tier here: shell tools cannot run")
    budget = max(4, examples // 3) if name in SLOW_TOOLS else examples

    @settings(max_examples=budget, deadline=None, database=None, derandomize=budget == FAST_EXAMPLES or name in SLOW_TOOLS,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                                     HealthCheck.filter_too_much])
    @given(arguments=arguments_for(spec))
    def check(arguments: Any) -> None:
        assume(not hangs_the_lexer(name, arguments))
        base = Path(tempfile.mkdtemp(prefix="besser-fuzz-"))
        try:
            ws, outside, home = _make_world(base)
            services = {"workspace": Workspace(ws), **_services(ws, home)}
            executor = Executor(CATALOG, ToolContext(services=services), policy=ExecutionPolicy.allowing(list(Category)),
                                approvals=ApprovalPolicy.without_approval_for(*Category), approver=always_approve)
            assert name in executor.offered, f"{name} is not offered with every service present"
            before_outside, before_ws = tree_state(outside), tree_state(ws)
            try:
                result = executor.execute_sync(ToolCall("f1", name, arguments))
            except Exception as exc:
                if known_finding(f"{type(exc).__name__}: {exc}") is None:
                    raise
                return
            finally:
                if "shell" in services:
                    services["shell"].close()
            if not result.ok:
                assert result.error is not None, name
                if result.error.code not in NAMED and known_finding(result.error.message) is not None:
                    return
                assert result.error.code in NAMED, (name, result.error, _shown(arguments))
                if spec.category is not Category.SHELL:
                    assert tree_state(ws) == before_ws, f"{name} refused ({result.error.code}) but changed the workspace"
            assert tree_state(outside) == before_outside, f"{name} wrote outside the workspace"
            assert (outside / "secret.txt").read_text() == "outside\n"
        finally:
            shutil.rmtree(base, ignore_errors=True)

    check()


def _shown(arguments: Any) -> str:
    text = repr(arguments)
    return text if len(text) < 400 else text[:400] + f"... ({len(text)} chars)"
