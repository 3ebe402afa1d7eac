# ruff: noqa: F811 - the host fixture imported from api_fixtures is requested by name
"""test_api on BESSER's generated Library backend: scenarios, refusals, retention and replay.

Real parts: the backend comes from BESSER's FastAPI generator (F5's ``run_phase1``), every
scenario runs in a fresh child of one real sandboxed warm host (bubblewrap here, network
unshared), shared by the whole module; tools are called through the Executor.
"""

from __future__ import annotations

import pytest
from api_fixtures import (  # noqa: F401 - host is a fixture
    call,
    executor_for,
    host,
    library_workspace,
    requires_sandbox,
    tree_state,
)

from kernel_ext.tools.api_test import failing_scenarios, replay_all, validate_run
from kernel_ext.tools.base import RunState
from kernel_ext.validation.library_scenario import library_requests
from kernel_ext.validation.retained import MAX_RETAINED, ScenarioStore
from kernel_ext.validation.scenario import RequestSpec

pytestmark = requires_sandbox


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return library_workspace(tmp_path_factory.mktemp("library") / "project")


@pytest.fixture
def run(library, host):
    """A fresh run (its own retained scenarios) over the shared Library project and host."""
    state = RunState(run_id="f6-scenarios")
    return executor_for(library, host, state=state), state


def test_the_20_request_library_scenario_passes_with_references_everywhere(run):
    executor, _ = run
    result = call(executor, "test_api", {"requests": library_requests()})
    assert result.ok, result.observation
    report = result.data["report"]
    assert report["passed"] is True and len(report["requests"]) == 20, result.observation
    rows = report["requests"]
    assert rows[7]["path"] == "/book/1/"  # {{4.book.id}} resolved in the path
    assert rows[5]["request"]["body"]["authors"] == [1, 2]  # references in the body keep their JSON type
    assert rows[4]["assertions"][0] == {"path": "status", "expected": 200, "actual": 200, "ok": True, "message": ""}
    assert rows[17]["status"] == 404 and rows[17]["passed"]
    assert all(r["duration_ms"] > 0 for r in rows) and report["sandbox"] in ("bwrap", "landlock")
    assert "passed (20/20" in result.observation


def test_report_is_data_with_text_and_html(run):
    executor, _ = run
    requests = [{"method": "POST", "path": "/library/", "json": {"name": "<b>L</b>", "address": "x" * 5000}},
                {"method": "GET", "path": "/library/{{0.library.id}}/", "expected_status": 200,
                 "expected_fields": {"library.name": "other"}}]
    result = call(executor, "test_api", {"requests": requests})
    from kernel_ext.validation.request_report import ScenarioReport

    report = ScenarioReport.model_validate(result.data["report"])
    assert not report.passed
    second = report.requests[1]
    assert second.path == "/library/1/" and second.status == 200 and second.expected_status == 200
    failed = [a for a in second.assertions if not a.ok]
    assert failed[0].path == "library.name" and failed[0].expected == "other" and failed[0].actual == "<b>L</b>"
    assert second.response.truncated and second.response.body_chars > 5000 and len(second.response.body) <= 4000
    assert "library.name: expected 'other', got '<b>L</b>'" in report.to_text()
    html = report.to_html()
    assert "&lt;b&gt;L&lt;/b&gt;" in html and "<b>L</b>" not in html


def test_21_requests_are_refused_before_anything_runs(run, host, library):
    executor, _ = run
    before, jobs = tree_state(library), host.submitted
    result = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/book/"}] * 21})
    assert not result.ok and result.error.code == "invalid_argument" and "20" in result.observation
    assert host.submitted == jobs and tree_state(library) == before


@pytest.mark.parametrize("header", [
    "Host", "Cookie", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
    "Upgrade", "Proxy-Authorization", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded",
    "X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override", "X-Real-IP", "X-Original-URL", "User-Agent", "Bad Header",
])
def test_every_refused_header_is_refused_by_name(run, host, library, header):
    executor, _ = run
    before, jobs = tree_state(library), host.submitted
    result = call(executor, "test_api", {"scenario_id": "h", "requests": [{"method": "GET", "path": "/book/", "headers": {header: "1"}}]})
    assert not result.ok and result.error.code == "header_refused", result.observation
    assert header in result.observation
    assert host.submitted == jobs and tree_state(library) == before
    assert call(executor, "test_api", {"action": "list"}).data["scenarios"] == []  # nothing retained


def test_allowed_headers_reach_the_app(run):
    executor, _ = run
    headers = {"Authorization": "Bearer abcdefgh12345", "Accept": "application/json", "Content-Type": "application/json",
               "Accept-Language": "en", "If-Match": "*", "If-None-Match": "x", "Idempotency-Key": "k-1", "X-Request-Id": "r-1"}
    result = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/book/", "headers": headers, "expected_status": 200}]})
    assert result.ok and result.data["passed"], result.observation


def test_a_cors_request_and_its_preflight_reach_the_app(run):
    """Origin and the preflight headers are plain request headers: the scenario sees the app's CORS answer."""
    executor, _ = run
    origin = {"Origin": "https://library.example.org"}
    requests = [{"method": "GET", "path": "/book/", "headers": origin, "expected_status": 200},
                {"method": "OPTIONS", "path": "/book/", "expected_status": 200,
                 "headers": {**origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}}]
    result = call(executor, "test_api", {"requests": requests})
    assert result.ok and result.data["passed"], result.observation
    answered = [{k.lower(): v for k, v in r["response"]["headers"].items()} for r in result.data["report"]["requests"]]
    assert all(h.get("access-control-allow-origin") for h in answered), answered  # the scaffold allows any origin


@pytest.mark.parametrize("path", ["http://example.com/book/", "https://127.0.0.1:8000/", "//example.com/book/", "ftp://x/y"])
def test_external_urls_are_refused(run, host, path):
    executor, _ = run
    jobs = host.submitted
    result = call(executor, "test_api", {"requests": [{"method": "GET", "path": path}]})
    assert not result.ok and result.error.code == "external_url"
    assert host.submitted == jobs


def test_no_shell_command_can_be_passed(run):
    executor, _ = run
    result = call(executor, "test_api", {"command": "ls", "requests": [{"method": "GET", "path": "/"}]})
    assert not result.ok and result.error.code == "invalid_argument"
    result = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/", "shell": "id"}]})
    assert not result.ok and result.error.code == "invalid_argument"


def test_a_missing_reference_fails_that_request_with_a_clear_error(run):
    executor, _ = run
    requests = [{"method": "POST", "path": "/library/", "json": {"name": "L", "address": "A"}},
                {"method": "GET", "path": "/library/{{0.room.id}}/"},
                {"method": "GET", "path": "/library/{{1.library.id}}/"}]
    result = call(executor, "test_api", {"requests": requests})
    assert result.ok and not result.data["passed"]
    rows = result.data["report"]["requests"]
    assert rows[0]["passed"] and rows[1]["status"] is None
    assert "reference: {{0.room.id}}: in response 0, the body has no field 'room' (fields: library, holdings_ids)" in rows[1]["error"]
    assert "response 1 has no JSON body" in rows[2]["error"]


def test_nothing_leaks_between_scenarios(run):
    executor, _ = run
    create = [{"method": "POST", "path": "/library/", "json": {"name": "First", "address": "A"}, "expected_fields": {"library.id": 1}},
              {"method": "GET", "path": "/library/count/", "expected_fields": {"count": 1}}]
    for _ in range(3):  # the same ids and counts every time: a fresh database per scenario
        result = call(executor, "test_api", {"requests": create})
        assert result.data["passed"], result.observation
    empty = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/library/", "expected_status": 200,
                                                      "expected_fields": {}}]})
    assert empty.data["report"]["requests"][0]["response"]["body"] == []


def test_retention_get_list_and_replay_by_id(run, host):
    executor, _ = run
    requests = [{"method": "POST", "path": "/library/", "json": {"name": "L", "address": "A"}, "expected_status": 200}]
    first = call(executor, "test_api", {"scenario_id": "make-library", "requests": requests})
    assert first.ok and first.data["retained"] and first.data["passed"]
    listing = call(executor, "test_api", {"action": "list"})
    assert listing.data["scenarios"] == [{"scenario_id": "make-library", "name": None, "requests": 1, "last": "passed", "runs": 1,
                                          "corrections": 0}]
    jobs = host.submitted
    got = call(executor, "test_api", {"action": "get", "scenario_id": "make-library"})
    assert host.submitted == jobs  # get never executes
    assert got.data["requests"] == [{"method": "POST", "path": "/library/", "json": {"name": "L", "address": "A"}, "headers": {},
                                     "expected_status": 200, "expected_fields": None}]
    assert got.data["last_report"]["passed"] is True
    replayed = call(executor, "test_api", {"scenario_id": "make-library"})
    assert replayed.ok and replayed.data["passed"] and host.submitted == jobs + 1
    named = call(executor, "test_api", {"name": "Make a Library", "requests": requests})
    assert named.data["scenario_id"] == "make-a-library"


def test_changing_a_retained_scenario_needs_a_correction_reason(run, host):
    executor, state = run
    original = [{"method": "GET", "path": "/library/count/", "expected_fields": {"count": 5}}]
    assert not call(executor, "test_api", {"scenario_id": "count", "requests": original}).data["passed"]
    changed = [{"method": "GET", "path": "/library/count/", "expected_fields": {"count": 0}}]
    jobs = host.submitted
    refused = call(executor, "test_api", {"scenario_id": "count", "requests": changed})
    assert not refused.ok and refused.error.code == "correction_required" and host.submitted == jobs
    kept = call(executor, "test_api", {"action": "get", "scenario_id": "count"}).data
    assert kept["requests"][0]["expected_fields"] == {"count": 5} and kept["corrections"] == []
    assert failing_scenarios(state) == ["count"]
    fixed = call(executor, "test_api", {"scenario_id": "count", "requests": changed,
                                        "correction_reason": "an empty database has no library"})
    assert fixed.ok and fixed.data["passed"]
    kept = call(executor, "test_api", {"action": "get", "scenario_id": "count"}).data
    assert kept["corrections"][0]["reason"] == "an empty database has no library"
    assert kept["corrections"][0]["previous_requests"][0]["expected_fields"] == {"count": 5}
    assert failing_scenarios(state) == []


def test_retained_scenarios_are_replayed_after_a_source_change_and_block(tmp_path, host):
    project = library_workspace(tmp_path / "project")
    state = RunState(run_id="f6-replay")
    executor = executor_for(project, host, state=state)
    for i in range(3):
        scenario = [{"method": "POST", "path": "/author/", "json": {"name": f"A{i}", "nationality": "X"}},
                    {"method": "GET", "path": "/author/count/", "expected_fields": {"count": 1}}]
        assert call(executor, "test_api", {"scenario_id": f"s{i}", "requests": scenario}).data["passed"]
    ctx = executor.context
    assert replay_all(ctx) == {}  # the source did not change: nothing is due
    starts = host.starts
    router = project / "backend" / "routers" / "author.py"
    router.write_text(router.read_text().replace('return {"count": count}', 'return {"count": count + 1}', 1))
    reports = replay_all(ctx)
    assert sorted(reports) == ["s0", "s1", "s2"] and not any(r.passed for r in reports.values())
    assert failing_scenarios(state) == ["s0", "s1", "s2"]
    assert host.starts == starts  # a source change replaces the children, never the warm host
    blockers = [f for f in validate_run(ctx).report.blockers if f.code == "scenario_failed"]
    assert len(blockers) == 3 and "count: expected 1, got 2" in blockers[0].message


def test_runtime_checks_off_means_nothing_runs(library, host):
    executor = executor_for(library, host, services={"run_options": {"enable_import_smoke_check": False}})
    jobs = host.submitted
    refused = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/book/"}]})
    assert not refused.ok and refused.error.code == "runtime_checks_disabled"
    assert call(executor, "test_api", {"action": "list"}).ok
    report = call(executor, "validate_app", {})
    assert report.ok and report.data["boots"] is None and any(f["code"] == "runtime_skipped" for f in report.data["findings"])
    assert host.submitted == jobs


def test_a_run_retains_at_most_ten_scenarios():
    store = ScenarioStore()
    requests = [RequestSpec.model_validate({"method": "GET", "path": "/"})]
    for i in range(MAX_RETAINED):
        store.save(f"s{i}", None, requests, None, None)
    from kernel_ext.errors import ToolFailure

    with pytest.raises(ToolFailure) as caught:
        store.save("one-more", None, requests, None, None)
    assert caught.value.code == "too_many_scenarios" and len(store.scenarios) == MAX_RETAINED
