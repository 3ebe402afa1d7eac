# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""A credential used as a key (a tool-argument name, a JSON key, a header name) is redacted like a value.

The model chooses argument names and the keys inside arguments, so a key it echoes (G7: "a key
used as a tool-argument name is stored verbatim") must be cut before an event is built, and
stay cut in ``events.jsonl``, the SSE stream and the run view. Driven through the Python API
(the customize loop with a scripted model, labelled: no live LLM) and REST (a hosted run, its
script from a file); the redaction owner itself is checked over every report shape that
carries keys (events, request reports, the request-report widget). The boundary also refuses
such a call by name (``SECRET_IN_ARGUMENTS``) before policy and approval, so no card shows one.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    poll,
    runs_dir,
)
from tornado.httpclient import HTTPClientError

from kernel_ext.boundary import ExecutionPolicy, Executor
from kernel_ext.hosting.bus import EventLog
from kernel_ext.pipeline.guards import Budgets, EditChurn
from kernel_ext.pipeline.loop import LoopGuards, customize
from kernel_ext.pipeline.reporting import boundary_observer
from kernel_ext.providers.messages import Conversation
from kernel_ext.providers.scripted import Script, ScriptedProvider, Turn, call
from kernel_ext.secrets import REDACTED, redact, secret_values
from kernel_ext.server.handlers.base import STATE_KEY
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.tools.task_list import TaskList
from kernel_ext.validation.scenario import RequestSpec
from kernel_ext.workspace import Workspace
from widgets.report import RequestReport
from widgets.runview import RunView

SERVICE_SECRET = "Zq8mW3nT7xVb2Lp9Hk4cR1"  # a server credential shaped like no known key format


def hostile_calls(secret: str) -> list[dict]:
    """Calls whose argument names, nested JSON keys and header names are the secret."""
    return [
        {"name": "read_file", "arguments": {"path": "probe.txt", secret: "x", "nested": {secret: {"deeper": 1}}}},
        {"name": "test_api", "arguments": {"requests": [
            {"method": "POST", "path": "/books/", "headers": {f"X-{secret}": "v"}, "json": {secret: {"inner": secret}}}]}},
    ]


def assert_absent(secret: str, *texts: tuple[str, str]) -> None:
    for where, text in texts:
        assert secret not in text, f"{where} shows the secret"


def view_of(events) -> str:
    view = RunView().replay(events)
    bundle = view._repr_mimebundle_()
    return view.to_html() + view.to_text() + json.dumps(bundle, default=str)


def test_python_api_run_stores_no_secret_key(world, tmp_path, monkeypatch):
    monkeypatch.setenv("BESSER_SEC_SERVICE_TOKEN", SERVICE_SECRET)
    events = EventLog("sec-keys", tmp_path / "events.jsonl", known_secrets=secret_values())
    tasks = TaskList()
    context = ToolContext(services={"workspace": Workspace(world.ws), "task_list": tasks})
    executor = Executor(default_catalog(), context, policy=ExecutionPolicy.allowing([Category.READ, Category.EDIT, Category.PLAN]),
                        approver=lambda request: True, observer=boundary_observer(events))
    turns = [Turn("", tuple(call(c["name"], c["arguments"]) for c in hostile_calls(SERVICE_SECRET))), Turn("done")]
    conversation = Conversation(system="test")
    conversation.user("do it")
    asyncio.run(customize(ScriptedProvider(Script.of("secret-keys", turns)), conversation, executor, events, tasks,
                          LoopGuards(Budgets(max_turns=4), EditChurn(limit=5))))
    on_disk = (tmp_path / "events.jsonl").read_text()
    calls = [e for e in events.events if e.type == "tool_call"]
    assert len(calls) == 2 and REDACTED in json.dumps(calls[0].arguments)
    results = [e.error_code for e in events.events if e.type == "tool_result"]
    assert results == ["secret_in_arguments"] * 2  # refused by name: a secret in a call is never run nor carded
    assert_absent(SERVICE_SECRET, ("events.jsonl", on_disk), ("the run view", view_of(EventLog.load("sec-keys", tmp_path / "events.jsonl").events)))
    assert world.unchanged()


@pytest.mark.slow
async def test_rest_run_stores_no_secret_key(jp_fetch, jp_serverapp, runs_dir, world, tmp_path, jp_root_dir):
    from kernel_ext.model.examples import build_library_model
    from kernel_ext.model.jsonform import model_to_dict

    state = jp_serverapp.web_app.settings[STATE_KEY]
    secret = state.capability.token  # a credential the server knows and redacts
    script = jp_root_dir / "script.json"  # a file a request names lies under the server's root
    script.write_text(json.dumps({"name": "secret-keys", "turns": [
        {"text": "", "tool_calls": [{"name": "submit_tasks", "arguments": {"tasks": ["probe"]}}]},
        {"text": "", "tool_calls": hostile_calls(secret)},
        *[{"text": "done"}] * 6,
    ]}))
    body = {"kind": "generate", "request": "A FastAPI backend", "model_json": model_to_dict(build_library_model()),
            "provider": f"scripted:{script}", "target": "fastapi_backend", "approve": "none"}
    response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    run = state.manager.get(json.loads(response.body)["run"]["id"])
    await poll(lambda: any(e.type == "tool_result" and e.name == "test_api" for e in run.events.events) or (run.task and run.task.done()),
               timeout=300)
    try:
        await jp_fetch("besser-agent", "runs", run.id, "cancel", method="POST", body="{}")
    except HTTPClientError:
        pass
    await asyncio.wait_for(run.wait(), 120)
    # Refused by name at the boundary, before any card: nobody is asked to approve what they cannot see.
    refused = {e.name: e.error_code for e in run.events.events if e.type == "tool_result" and e.name in ("read_file", "test_api")}
    assert refused == {"read_file": "secret_in_arguments", "test_api": "secret_in_arguments"}, [e.type for e in run.events.events]
    assert not [e for e in run.events.events if e.type == "approval_requested"]
    calls = [e for e in run.events.events if e.type == "tool_call" and e.name == "test_api"]
    stream = (await jp_fetch("besser-agent", "runs", run.id, "events")).body.decode()
    on_disk = (runs_dir / run.id / "events.jsonl").read_text()
    every_file = [(str(p), p.read_bytes().decode("utf-8", "replace")) for p in (runs_dir / run.id).rglob("*") if p.is_file()]
    assert_absent(secret, ("events.jsonl", on_disk), ("the SSE stream", stream), ("the run view", view_of(run.events.events)),
                  *every_file)
    assert REDACTED in json.dumps(calls[0].arguments)  # the call as recorded: its keys cut
    assert world.unchanged()


def test_every_report_shape_redacts_keys_and_header_names():
    """The one owner (``kernel_ext.secrets.redact``) and the reports built on it."""
    known = (SERVICE_SECRET,)
    value = {SERVICE_SECRET: 1, "headers": {f"X-{SERVICE_SECRET}": "v", "Accept": "a"},
             "sk-abcdefghijklmnopqrstuvwx": 2, "list": [{SERVICE_SECRET: SERVICE_SECRET}]}
    cut = redact(value, known)
    assert SERVICE_SECRET not in json.dumps(cut) and "sk-abcdefghijklmnopqrstuvwx" not in json.dumps(cut)
    assert len(cut) == len(value) and cut["headers"]["Accept"] == "a"  # nothing lost: colliding keys stay apart
    spec = RequestSpec.model_validate({"method": "GET", "path": "/", "headers": {f"X-{SERVICE_SECRET}": "v"}, "json": {SERVICE_SECRET: 1}})
    assert SERVICE_SECRET not in json.dumps(spec.shown(known))
    widget = RequestReport({"requests": [{"method": "GET", "path": "/", "status": 200,
                                          "request": {"headers": {"X-sk-abcdefghijklmnopqrstuvwx": "v"}},
                                          "response": {"headers": {"sk-abcdefghijklmnopqrstuvwx": "1"}}}]})
    assert "sk-abcdefghijklmnopqrstuvwx" not in widget.to_text() + widget.to_html()
