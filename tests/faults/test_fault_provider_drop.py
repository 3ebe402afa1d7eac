"""A provider that drops the connection mid-stream, inside a whole run.

A real loopback server speaks the OpenAI streaming protocol (``tests/provider_server.py``;
the model's turns are authored, not a live LLM). The run plans (turn 1), writes ``a.py``
(turn 2), and the third reply is cut in the middle of a ``write_file`` call's arguments.
The run must end visibly with the upstream error named, the call that was cut never
executed (no ``b.py``, no half file), the earlier work kept, Phase 3 still run, and the
cut stream never re-sent.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from provider_server import Plan, fragments, loopback_only, openai_stream, server  # noqa: F401

from kernel_ext.providers.openai_compat import OpenAICompatProvider
from kernel_ext.providers.retry import RetryPolicy

pytestmark = pytest.mark.slow

B_ARGS = json.dumps({"path": "backend/b.py", "content": "B = 'never complete'\n" * 50})


def _plans() -> list[Plan]:
    plan_tasks = openai_stream([], [("c1", "submit_tasks", fragments(json.dumps({"tasks": ["add module a", "add module b"]}), 9))])
    write_a = openai_stream(["Writing a."], [("c2", "write_file", fragments(json.dumps({"path": "backend/a.py", "content": "A = 1\n"}), 7))])
    write_b = openai_stream(["Writing b."], [("c3", "write_file", fragments(B_ARGS, 11))])
    return [Plan(chunks=plan_tasks), Plan(chunks=write_a), Plan(chunks=write_b, disconnect_after=len(write_b) // 2)]


def test_a_stream_cut_mid_tool_call_ends_the_run_visibly_and_runs_nothing(server, tmp_path):  # noqa: F811
    from kernel_ext.pipeline.generation import generate

    server.plan(*_plans())
    provider = OpenAICompatProvider(model="gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-test-drop-0123456789",
                                    retry=RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05, jitter=False))

    async def go():
        run = generate("example:library", "A FastAPI backend with modules a and b", run_dir=tmp_path / "run",
                       provider=provider, target="fastapi_backend", approve="all")
        return run, await asyncio.wait_for(run.wait(), 240)

    run, done = asyncio.run(go())
    assert done is not None, "the run never ended"
    errors = [e for e in run.events.events if e.type == "error"]
    assert any(e.code == "UPSTREAM_LLM" and "dropped mid-stream" in e.message for e in errors), [(e.code, e.message) for e in errors]
    results = [(e.name, e.ok) for e in run.events.events if e.type == "tool_result"]
    assert ("write_file", True) in results and len([r for r in results if r[0] == "write_file"]) == 1, results
    app = run.context.layout.app_dir / "backend"
    assert (app / "a.py").read_text() == "A = 1\n"
    assert not (app / "b.py").exists() and not list(app.glob(".b.py*")), "the cut call left a file"
    phases = [(e.phase, e.status) for e in run.events.events if e.type == "phase"]
    assert ("validate", "done") in phases, phases  # Phase 3 still judged the tree
    assert len(server.requests) == 3, "a stream already under way was sent again"
    on_disk = [json.loads(line) for line in run.context.layout.events_path.read_text().splitlines()]
    assert on_disk[-1]["type"] == "done" and len(on_disk) == len(run.events.events)
    assert "sk-test-drop-0123456789" not in run.context.layout.events_path.read_text()
