# ruff: noqa: F811 - the host fixture imported from api_fixtures is requested by name
"""Credentials never shown: report, ``get``, trace and events, also when the app echoes them.

The echo app (``tests/apps/echo_app``) issues a deterministic token and session cookie, so the
test knows the exact values it must never find; it echoes the Authorization header in its
body, in a response header, in an error message and in its log, and the token it issued in
every disguise of ``secret_disguises.FORMS`` (percent-encoded byte by byte, escapes, HTML
entities, colon/space hex, invisible characters between its characters; issue 28, item 6).
"""

from __future__ import annotations

import hashlib
import json

import pytest
from api_fixtures import app_workspace, call, executor_for, host, requires_sandbox  # noqa: F401 - host is a fixture
from secret_disguises import FORMS, assert_hidden, reveal

from kernel_ext.boundary import ToolCall
from kernel_ext.hosting.bus import EventLog
from kernel_ext.pipeline.reporting import report_call, report_result
from kernel_ext.tools.base import RunState

pytestmark = requires_sandbox

PASSWORD = "correct-horse-battery-staple"
TOKEN = "tok-" + hashlib.sha256(f"ada:{PASSWORD}".encode()).hexdigest()[:32]
SESSION = "sess-" + hashlib.sha256(b"session:ada").hexdigest()[:32]
API_KEY = "literal-api-key-7f3a9c21"
WRONG = "wrong-token-5d41402abc"
SECRETS = (PASSWORD, TOKEN, SESSION, API_KEY, WRONG)

SCENARIO = [
    {"method": "POST", "path": "/register", "json": {"username": "ada", "password": PASSWORD}, "expected_status": 201},
    {"method": "POST", "path": "/login", "json": {"username": "ada", "password": PASSWORD}, "expected_status": 200},
    {"method": "GET", "path": "/me", "headers": {"Authorization": "Bearer {{1.access_token}}"}, "expected_status": 200,
     "expected_fields": {"username": "ada"}},
    {"method": "GET", "path": "/whoami", "expected_status": 200, "expected_fields": {"username": "ada"}},
    {"method": "GET", "path": "/echo", "headers": {"X-Api-Key": API_KEY}, "expected_status": 200},
    {"method": "GET", "path": "/me", "headers": {"Authorization": f"Bearer {WRONG}"}, "expected_status": 401},
    {"method": "GET", "path": "/crash", "headers": {"Authorization": "Bearer {{1.access_token}}"}, "expected_status": 500},
]


@pytest.fixture(scope="module")
def echo(tmp_path_factory):
    return app_workspace("echo_app", tmp_path_factory.mktemp("echo") / "project")


def assert_no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{where} shows {secret!r}"


def test_register_login_and_send_the_returned_token_with_the_kept_cookie(echo, host):
    executor = executor_for(echo, host)
    result = call(executor, "test_api", {"scenario_id": "auth", "requests": SCENARIO})
    assert result.ok and result.data["passed"], result.observation
    rows = result.data["report"]["requests"]
    assert rows[3]["response"]["body"] == {"username": "ada"}  # the cookie set by /login came back on /whoami
    assert rows[2]["response"]["body"]["username"] == "ada"


def test_nothing_shows_a_credential_even_when_the_app_echoes_it(echo, host, tmp_path):
    state = RunState(run_id="f6-redaction")
    executor = executor_for(echo, host, state=state)
    events = EventLog("f6-redaction", tmp_path / "events.jsonl")
    shown: list[tuple[str, str]] = []
    for n, arguments in enumerate([{"scenario_id": "auth", "requests": SCENARIO}, {"action": "get", "scenario_id": "auth"},
                                   {"action": "list"}, {"scenario_id": "auth"}]):
        call_ = ToolCall(f"c{n}", "test_api", arguments)
        report_call(events, call_)  # the trace: what the run records for each call and result
        result = executor.execute_sync(call_)
        report_result(events, result)
        assert result.ok, result.observation
        shown += [(f"observation {n}", result.observation), (f"data {n}", json.dumps(result.data, default=str))]
    events.close_file()
    shown.append(("events.jsonl", (tmp_path / "events.jsonl").read_text()))
    report = state.stores["api_test.scenarios"].scenarios["auth"].last_report
    shown += [("report html", report.to_html()), ("report text", report.to_text()), ("report json", report.model_dump_json())]
    for where, text in shown:
        assert_no_secret(text, where)
    rows = report.requests
    # The echoes are there, redacted: body, response header, error message, app log.
    assert rows[2].response.body["you_sent"] == "[redacted]" and "[redacted]" in rows[2].response.body["note"]
    assert rows[2].response.headers["x-echo-auth"] == "[redacted]"
    assert rows[1].response.headers["set-cookie"] == "[redacted]" and rows[1].response.body["access_token"] == "[redacted]"
    assert rows[1].response.body["token_type"] == "bearer"  # it names the kind of token; it is not one
    assert rows[4].request.headers["X-Api-Key"] == "[redacted]"
    assert "unknown token [redacted]" in json.dumps(rows[5].response.body)
    assert rows[6].error and "boom while handling" in rows[6].error and "[redacted]" in rows[6].error
    assert "debug: handling a request with" in report.app_log_tail and "[redacted]" in report.app_log_tail
    got = state.stores["api_test.scenarios"].shown("auth")
    assert got["requests"][0]["json"]["password"] == "[redacted]"
    assert got["requests"][5]["headers"]["Authorization"] == "[redacted]"
    assert got["requests"][2]["headers"]["Authorization"] == "[redacted]"


def test_fresh_state_per_scenario_in_a_stateful_app(echo, host):
    executor = executor_for(echo, host)
    for _ in range(2):  # the in-memory user table of the app starts empty each time
        result = call(executor, "test_api", {"requests": [SCENARIO[0], {"method": "GET", "path": "/count",
                                                                         "expected_fields": {"users": 1}}]})
        assert result.data["passed"], result.observation


def test_a_credential_where_a_long_body_is_cut_is_redacted_before_the_cut(echo, host):
    executor = executor_for(echo, host)
    requests = [*SCENARIO[:2], {"method": "GET", "path": "/pad?n=3940", "headers": {"Authorization": "Bearer {{1.access_token}}"}}]
    result = call(executor, "test_api", {"requests": requests})
    row = result.data["report"]["requests"][2]
    assert row["response"]["truncated"] and row["response"]["body_chars"] > 4000
    # Unredacted, the cut at 4000 characters would keep the token's first 32 characters.
    text = json.dumps(result.data) + result.observation
    assert TOKEN[:12] not in text and TOKEN[-12:] not in text


def test_a_token_the_app_issued_is_hidden_in_every_disguise_and_every_sink(echo, host, tmp_path):
    state = RunState(run_id="disguised")
    executor = executor_for(echo, host, state=state)
    events = EventLog("disguised", tmp_path / "events.jsonl")
    forms, sinks, shown = list(FORMS), [], []
    for batch in range(0, len(forms), 15):  # a scenario holds at most 20 requests
        requests = [*SCENARIO[:2], *({"method": "GET", "path": f"/disguised?form={form}", "expected_status": 200,
                                      "headers": {"Authorization": "Bearer {{1.access_token}}"}} for form in forms[batch : batch + 15])]
        call_ = ToolCall(f"c{batch}", "test_api", {"scenario_id": f"disguised-{batch}", "requests": requests})
        report_call(events, call_)
        result = executor.execute_sync(call_)
        report_result(events, result)
        assert result.ok and result.data["passed"], result.observation
        report = state.stores["api_test.scenarios"].scenarios[f"disguised-{batch}"].last_report
        shown += [(form, reveal(row.response.body), reveal(row.response.headers.get("x-token-shown", ""))) # an invisible
                  for form, row in zip(forms[batch:], report.requests[2:])]  # character after the token may stay
        assert report.app_log_tail.count("debug: issued [redacted]") == len(report.requests) - 2
        sinks += [("observation", result.observation), ("data", json.dumps(result.data)), ("report html", report.to_html()),
                  ("report text", report.to_text()), ("report json", report.model_dump_json()), ("app log", report.app_log_tail)]
    events.close_file()
    assert len(shown) == len(forms) and [s for s in shown if s[1:] != ("[redacted]", "[redacted]")] == []  # each arrived, cut whole
    for where, text in [*sinks, ("events.jsonl", (tmp_path / "events.jsonl").read_text())]:
        assert_hidden(text, TOKEN, where)
