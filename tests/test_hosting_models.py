"""Hosting's typed seams: one request model on both ends, one run summary, typed operator caps."""

from __future__ import annotations

import asyncio
import json

import pytest

from kernel_ext.hosting.bodies import resolve_body
from kernel_ext.hosting.manager import RunManager
from kernel_ext.hosting.options import OperatorSettings, RunRequest, ScenarioRequest
from kernel_ext.hosting.requests import RequestRefused, capped, fingerprint, parse_request, payload
from kernel_ext.hosting.summaries import RunSummary, disk_summary, summarize
from kernel_ext.server.report import describe_configuration

SUMMARY_KEYS = {"id", "status", "live", "request", "model_name", "provider_label", "started_at", "ended_at",
                "events", "pending_approvals", "summary", "run_dir"}


@pytest.mark.parametrize("fields", [
    {"kind": "generate", "request": "a library API", "model_path": "example:library", "max_turns": 3, "approve": "edits"},
    {"kind": "generate", "request": "x", "model_json": {"name": "M", "classes": []}, "target": "fastapi_backend"},
    {"kind": "scenario", "scenario": "side-effects", "allow": ["edit"]},
    {"kind": "scenario"},
])
def test_what_the_magic_sends_is_what_the_server_reads_back(fields):
    request = parse_request(fields)
    sent = json.loads(json.dumps(payload(request)))  # the POST body, through the wire's JSON
    assert parse_request(sent) == request
    assert {k: v for k, v in sent.items() if k != "kind"} == {k: v for k, v in fields.items() if k != "kind"}


def test_a_field_only_the_operator_decides_is_dropped_on_both_ends():
    request = parse_request({"request": "x", "allow_shell_tools": True, "shell_tools_enabled": True})
    assert isinstance(request, RunRequest) and "allow_shell_tools" not in payload(request)
    with pytest.raises(RequestRefused) as refused:
        parse_request({"kind": "scenario", "allow": ["shell"]})
    assert refused.value.code == "INVALID_REQUEST"


def test_operator_caps_are_typed_fields_that_cap_a_request():
    operator = OperatorSettings.from_environment({}, max_turns=5, max_cost_usd=0.5)
    request = RunRequest(request="x", max_turns=40, max_cost_usd=0.1, max_runtime_s=99)
    limited = capped(request, operator)
    assert (limited.max_turns, limited.max_cost_usd, limited.max_runtime_s) == (5, 0.1, 99)
    assert operator.budget_caps() == {"max_turns": 5, "max_cost_usd": 0.5}
    assert describe_configuration(operator, sandbox={})["budgets"] == {"max_turns": 5, "max_cost_usd": 0.5}
    assert capped(request, OperatorSettings()) is request


def test_a_model_path_outside_the_root_is_refused_before_a_body_exists(tmp_path):
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    (tmp_path / "root").mkdir()
    operator = OperatorSettings(model_root=str(tmp_path / "root"))
    with pytest.raises(RequestRefused) as refused:
        resolve_body(RunRequest(request="x", model_path=str(outside)), operator)
    assert refused.value.code == "MODEL_PATH_OUTSIDE_ROOT"


async def test_the_live_and_the_disk_summary_of_a_run_are_one_model(tmp_path):
    manager = RunManager(tmp_path / "runs")
    run = manager.start(ScenarioRequest(allow=["edit", "test"]))
    decided: list[str] = []
    for _ in range(2):  # both cards: edit, then test
        for _ in range(2000):
            pending = [c for c in run.pending_approvals() if c not in decided]
            if pending:
                break
            await asyncio.sleep(0.005)
        assert run.decide(pending[0], True)
        decided.append(pending[0])
    await asyncio.wait_for(run.wait(), 30)
    live, disk = summarize(run), disk_summary(run.context.layout.run_dir)
    assert isinstance(disk, RunSummary) and live.kind == "scenario" and disk.kind is None and disk.fingerprint is None
    assert set(disk.as_json()) == SUMMARY_KEYS and set(live.as_json()) == SUMMARY_KEYS | {"kind", "fingerprint"}
    assert live.model_dump(exclude={"kind", "fingerprint"}) == disk.model_dump(exclude={"kind", "fingerprint"})
    assert live.fingerprint == fingerprint(run.context.options)  # a re-run cell finds its live twin by it
    assert live.status == "completed" and live.events == len(run.events.events) and not live.live
    assert [s.id for s in manager.list()] == [run.id]
