# ruff: noqa: F811 - the fixtures imported from appenv_fixtures are requested by name
"""Requirements lines the reader cannot evaluate, and requirements that choose their own source.

A malformed marker, specifier, extra or URL is one ``requirements_invalid`` refusal quoting the
line, through the reader, ``environment_for``, ``test_api`` and ``validate_app`` (never an
``internal_error`` or a traceback); the reader is fuzzed with malformed pieces. A ``name @ URL``
line is never a requirement the overlay installs, whatever the URL looks like.
"""

from __future__ import annotations

import json

import pytest
from api_fixtures import call, executor_for, requires_sandbox
from appenv_fixtures import app_project, no_sources, tree  # noqa: F401 - fixtures by name
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_ext.appenv.environment import environment_for
from kernel_ext.appenv.requirements import MAX_LINE_CHARS, read_requirements

from kernel_ext.errors import ToolFailure
from kernel_ext.tools.base import RunState
from kernel_ext.validation.apphost.host import AppHost
from kernel_ext.validation.validate import validate_app

UNEVALUABLE = [
    'pkg; python_version ~= "foo"',  # the case: parses, then the comparison is undefined
    "pkg; os_name ~= 'posix'",
    "pkg; python_version <",  # a marker cut short
    "pkg; nonsense_variable == '1'",
    "pkg[ext-",  # an extra never closed
    "pkg[a b]>=1",
    "pkg>=>1",  # specifiers
    "pkg==1.0.*.post1",
    "pkg~=1",
    "pkg @",  # a URL missing
    "pkg @ ; python_version > '3'",
    "pkg; " + "(" * 600 + "python_version > '3'" + ")" * 600,  # a marker nested past the parser's recursion
    "pkg" + " " * MAX_LINE_CHARS + ">=1",
    "not a requirement!!",
]


@pytest.mark.parametrize("line", UNEVALUABLE)
def test_a_line_the_reader_cannot_evaluate_is_named_invalid(line):
    listed = read_requirements(f"fastapi\n{line}\n")
    assert [r.name for r in listed.requirements] == ["fastapi"]
    assert [quoted for quoted, _why in listed.invalid] == [line[:200]]
    assert listed.invalid[0][1]  # with a reason


def test_environment_for_refuses_an_invalid_line_by_name_and_writes_nothing(no_sources, tmp_path):
    with pytest.raises(ToolFailure) as caught:
        environment_for('fastapi\npkg; python_version ~= "foo"\n')
    assert caught.value.code == "requirements_invalid"
    assert "pkg; python_version ~= \"foo\"" in caught.value.message
    assert caught.value.data["invalid"][0]["line"] == 'pkg; python_version ~= "foo"'
    assert not (tmp_path / "cache").exists()


_PIECES = st.sampled_from([
    "pkg", "Pkg_2", "a.b", "[", "]", "[x", "x]", ",", ";", "@", " @ ", "(", ")", "'", '"', "~=", "==", "===", "!=",
    ">=", "<", ">", "<=", "1", "1.0", "1.*", "foo", ".*", "and", "or", "not", "in", " ", "python_version",
    "python_full_version", "os_name", "sys_platform", "extra", "platform_release", "implementation_name",
    "https://h/x", "file:x", "git+https://h/r", "#frag", "?q=1", "\\", "\t", "\x00", "\ufeff", "é", "v1",
])
_LINES = st.lists(_PIECES, min_size=1, max_size=14).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINES, min_size=1, max_size=6))
def test_fuzzed_requirements_never_raise_and_every_line_has_one_outcome(lines):
    listed = read_requirements("\n".join(lines))
    for requirement in listed.requirements:
        str(requirement)  # what is kept reads back
    for quoted, why in listed.invalid + listed.unusable:
        assert isinstance(quoted, str) and why


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(["pkg", "fastapi"]), marker=_LINES)
def test_fuzzed_markers_are_evaluated_or_named_invalid(name, marker):
    line = f"{name}; {marker}"
    listed = read_requirements(line)
    stripped = line.split(" #")[0].strip()
    outcomes = len(listed.requirements) + len(listed.invalid) + len(listed.unusable)
    assert outcomes <= 1  # kept, excluded by its marker (0), invalid or unusable: never an exception
    if listed.invalid:
        assert listed.invalid[0][0] == stripped[:200]


def test_test_api_ends_with_requirements_invalid_not_internal_error(no_sources, tmp_path):
    root = app_project(tmp_path / "project", 'fastapi\npkg; python_version ~= "foo"\n')
    before = tree(root)
    host = AppHost()
    try:
        result = call(executor_for(root, host, state=RunState(run_id="invalid-req")), "test_api",
                      {"requests": [{"method": "GET", "path": "/versions", "expected_status": 200}]})
    finally:
        host.close()
    assert not result.ok and result.error_code == "requirements_invalid", result.observation
    assert 'python_version ~= "foo"' in result.observation and "Traceback" not in result.observation
    assert host.submitted == 0 and tree(root) == before


def test_validate_app_reports_an_invalid_line_as_one_blocker_finding(no_sources, tmp_path):
    root = app_project(tmp_path / "project", "fastapi\npkg[ext-\n")
    before = tree(root)
    host = AppHost()
    try:
        result = validate_app(root, host=host)
    finally:
        host.close()
    (finding,) = [f for f in result.report.findings if f.code == "requirements_invalid"]
    assert finding.severity == "blocker" and finding.path == "backend/requirements.txt"
    assert "'pkg[ext-'" in finding.message
    text = result.to_text() + json.dumps(result.to_data())
    assert "Traceback" not in text and "internal_error" not in text
    assert host.submitted == 0 and tree(root) == before


# -- a requirement that names its own source ---------------------------------------------------------

DIRECT_URLS = [
    "pkg @ https://evil.example/simple/pkg",  # plain https, no archive suffix
    "pkg @ https://evil.example/pkg/",
    "pkg @ git+https://evil.example/pkg.git",
    "pkg @ git+https://evil.example/pkg@main",
    "pkg @ file:///tmp/pkg",
    "pkg @ file:pkg",
    "pkg @ https://evil.example/download#egg=pkg",
    "pkg @ https://evil.example/download?version=1&format=wheel",
    "pkg @ https://evil.example/pkg.whl?sig=1",  # a suffix hidden behind a query
    "pkg[extra] @ https://evil.example/pkg ; python_version >= '3'",
]


@pytest.mark.parametrize("line", DIRECT_URLS)
def test_a_requirement_with_a_direct_url_is_never_installed_whatever_its_suffix(line):
    listed = read_requirements(f"{line}\nfastapi\n")
    assert [r.name for r in listed.requirements] == ["fastapi"]
    assert not any(r.url for r in listed.requirements)
    (reason,) = [why for quoted, why in listed.unusable if quoted == line]
    assert "direct URL" in reason and "operator" in reason
    assert listed.invalid == ()


@pytest.mark.parametrize("line", DIRECT_URLS[:5])
def test_a_direct_url_never_reaches_the_overlay_plan(no_sources, tmp_path, line):
    environment = environment_for(f"fastapi\n{line}\n")  # fastapi is the server's: nothing to build
    assert environment.overlay is None and [p.name for p in environment.packages] == ["fastapi"]
    assert [quoted for quoted, _why in environment.unusable] == [line]
    assert not (tmp_path / "cache").exists()


@requires_sandbox
def test_a_run_whose_model_writes_an_unevaluable_marker_ends_with_one_named_finding(no_sources, tmp_path):
    from pipeline_helpers import Turn, events_of, run_pipeline
    from pipeline_helpers import call as scripted_call

    turns = [
        Turn("", (scripted_call("submit_tasks", {"tasks": ["add a dependency"]}),)),
        Turn("", (scripted_call("read_file", {"path": "backend/requirements.txt"}),)),
        Turn("", (scripted_call("write_file", {"path": "backend/requirements.txt",
                                               "content": 'fastapi\nsqlalchemy\npkg; python_version ~= "foo"\n'}),)),
        Turn("done"),
    ] + [Turn("cannot fix")] * 12
    run, done = run_pipeline(tmp_path, "Generate a FastAPI backend", turns)
    assert done.status == "blocked", done.status  # a finding the model can act on, not a failed run
    invalid = [f for f in events_of(run, "finding") if getattr(f, "code", "") == "requirements_invalid"
               or 'python_version ~= "foo"' in f.message]
    assert invalid and all('python_version ~= "foo"' in f.message for f in invalid)
    log = (run.context.layout.run_dir / "events.jsonl").read_text()
    assert "Traceback" not in log and "internal_error" not in log
