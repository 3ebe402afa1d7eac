"""The key stays with the hub: a real JupyterHub (docs/jupyterhub_config.py, ``BESSER_HUB_GATEWAY``)
runs the LLM gateway as a managed service holding the operator's key; each student's server gets
a gateway key of its own and the gateway's URL, never the operator's key.

Real: the hub, its proxy, the two single-user servers and their runs, the upstream endpoint
(tests/provider_server.py, answering only the operator's key), the budget refusal ending a run.
The gateway in the service slot is tests/gateway_standin.py, a LABELLED stand-in speaking
LiteLLM's proxy API (its admin routes, its budget reply), because LiteLLM's key store cannot run
on this machine (its Prisma engines cannot be fetched here: docs/jupyterhub.md, section 8).

Two students, a budget of $0.001 each, every upstream reply costing $0.0009: alice's third run
is refused by the gateway and ends ``budget_exhausted`` with the figures (on its events and in
``GET config``), without another upstream request; bob's run goes on. The operator's key is in
the gateway's environment and in no student server's environment, no file under their homes,
no event, no API answer; the upstream saw it, and only it, on every request.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from hub_fixtures import (
    answered,
    free_port,
    pid_with,
    process_environ,
    proxy_missing,
    run_once,
    start_classroom,
    start_hub,
    upstream_holding,
    wait_for_gateway,
)

STANDIN = Path(__file__).with_name("gateway_standin.py")
REAL_KEY = "sk-operator-" + secrets.token_hex(20)
OTHER_KEY = "sk-ant-operator-" + secrets.token_hex(20)  # another provider's key: it stays with the gateway too
BUDGET_USD = 0.001
USAGE = {"prompt_tokens": 4000, "completion_tokens": 500, "total_tokens": 4500}  # $0.0009 at gpt-4o-mini's price


@pytest.fixture(scope="module")
def upstream():
    with upstream_holding(REAL_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def hub(tmp_path_factory, upstream):
    reason = proxy_missing()
    if reason:
        pytest.skip(reason)
    port = free_port()
    operator_env = {
        "OPENAI_API_KEY": REAL_KEY,
        "ANTHROPIC_API_KEY": OTHER_KEY,
        "OPENAI_BASE_URL": upstream.url + "/v1",
        "BESSER_LLM_MODEL": "gpt-4o-mini",
        "BESSER_HUB_GATEWAY": "litellm",
        "BESSER_HUB_GATEWAY_PORT": str(port),
        "BESSER_HUB_GATEWAY_CMD": json.dumps([sys.executable, str(STANDIN)]),
        "BESSER_HUB_STUDENT_BUDGET_USD": str(BUDGET_USD),
    }
    hub = start_hub(tmp_path_factory.mktemp("hub"), operator_env)
    hub.gateway = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    try:
        wait_for_gateway(hub, hub.gateway, str(STANDIN), timeout=60)  # type: ignore[attr-defined]
        yield hub
    finally:
        hub.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def classroom(hub):
    return await start_classroom(hub)


def refused_at_gateway(hub) -> int:
    """Chat requests the gateway refused for want of budget (its access log, in the hub's log)."""
    log = hub.log_path.read_text(errors="replace")
    return sum('"POST /v1/chat/completions HTTP/1.1" 422' in line for line in log.splitlines())


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_each_student_has_a_key_and_a_budget_and_the_operators_key_stays_with_the_hub(hub, classroom, upstream):
    alice_env, bob_env = (process_environ(classroom["pids"][u]) for u in ("alice", "bob"))
    for env in (alice_env, bob_env):
        assert env["OPENAI_BASE_URL"] == f"{hub.gateway}/v1" and env["BESSER_LLM_PROVIDER"] == "openai"
        environ = "\0".join(f"{k}={v}" for k, v in env.items())
        assert env["OPENAI_API_KEY"].startswith("sk-") and REAL_KEY not in environ and OTHER_KEY not in environ
    assert alice_env["OPENAI_API_KEY"] != bob_env["OPENAI_API_KEY"]
    gateway_env = process_environ(pid_with(str(STANDIN)))
    assert (gateway_env["OPENAI_API_KEY"], gateway_env["ANTHROPIC_API_KEY"]) == (REAL_KEY, OTHER_KEY)  # the gateway holds them

    upstream.plan(*(answered(USAGE) for _ in range(4)))  # more than the budget allows: never all used
    alice, bob = classroom["tokens"]["alice"], classroom["tokens"]["bob"]
    statuses = [(await run_once(hub, "alice", alice))[1][-1]["status"] for _ in range(2)]
    assert set(statuses) <= {"completed", "blocked"} and len(upstream.requests) == 2, statuses
    spent_run, events = await run_once(hub, "alice", alice)
    assert events[-1]["status"] == "budget_exhausted", events[-1]
    refusal = next(e for e in events if e["type"] == "error" and e["code"] == "BUDGET_EXHAUSTED")
    assert refusal["limit_usd"] == BUDGET_USD and refusal["spent_usd"] == pytest.approx(0.0018)
    assert "over budget" in refusal["message"] and len(upstream.requests) == 2  # refused at the gateway
    assert refused_at_gateway(hub) == 1  # and asked once: no retry storm against the gateway

    _, theirs = await run_once(hub, "bob", bob)  # bob's budget is his own
    assert theirs[-1]["status"] in ("completed", "blocked") and len(upstream.requests) == 3
    assert {r.headers["authorization"] for r in upstream.requests} == {f"Bearer {REAL_KEY}"}

    async with hub.api(alice) as as_alice, hub.api(bob) as as_bob:  # GET config: what %besser config shows
        hers = (await as_alice.get("/user/alice/besser-agent/config")).json()["provider"]
        his = (await as_bob.get("/user/bob/besser-agent/config")).json()["provider"]
        answers = [json.dumps(hers), json.dumps(his),
                   (await as_alice.get(f"/user/alice/besser-agent/runs/{spent_run}")).text,
                   (await as_alice.get("/user/alice/besser-agent/runs")).text]
    assert hers["budget"]["exhausted"] is True and hers["budget"]["run_id"] == spent_run
    assert hers["budget"]["limit_usd"] == BUDGET_USD and hers["endpoint"].startswith(hub.gateway)
    assert "budget" not in his and his["configured"] is True

    # the teacher's view: spend per student from the gateway's own report (LiteLLM's /user/info)
    master = (hub.state_dir / "gateway_master_key").read_text().strip()
    report = {u: httpx.get(f"{hub.gateway}/user/info", params={"user_id": u}, headers={"Authorization": f"Bearer {master}"}).json()
              for u in ("alice", "bob")}
    assert report["alice"]["user_info"]["spend"] == pytest.approx(0.0018)
    assert report["bob"]["user_info"]["spend"] == pytest.approx(0.0009)
    assert report["alice"]["user_info"]["max_budget"] == BUDGET_USD

    # the operator's key: in no file under the students' homes (their runs' events included), no answer
    leaked = [str(p) for p in (hub.state_dir / "users").rglob("*")
              if p.is_file() and not p.is_symlink() and (REAL_KEY.encode() in p.read_bytes() or OTHER_KEY.encode() in p.read_bytes())]
    assert leaked == []
    assert not any(REAL_KEY in text or OTHER_KEY in text for text in answers)
    assert (hub.state_dir / "users" / "alice" / "besser_runs" / spent_run / "events.jsonl").is_file()


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_a_restarted_server_gets_a_new_key_and_keeps_its_spent_budget(hub, classroom, upstream):
    before = process_environ(classroom["pids"]["alice"])["OPENAI_API_KEY"]
    async with hub.api(hub.admin_token) as admin:
        stopped = await admin.delete("/hub/api/users/alice/server")
        assert stopped.status_code in (202, 204), stopped.text
        for _ in range(300):
            model = (await admin.get("/hub/api/users/alice")).json()
            if not model.get("servers"):
                break
            await asyncio.sleep(0.1)
    pid = await hub.start_server("alice")
    after = process_environ(pid)["OPENAI_API_KEY"]
    assert after != before and REAL_KEY not in after
    seen = len(upstream.requests)
    _, events = await run_once(hub, "alice", await hub.token_for("alice"))
    assert events[-1]["status"] == "budget_exhausted" and len(upstream.requests) == seen
    assert refused_at_gateway(hub) == 2
    async with httpx.AsyncClient() as client:  # the revoked key no longer opens the gateway
        old = await client.post(f"{hub.gateway}/v1/chat/completions", headers={"Authorization": f"Bearer {before}"},
                                json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    assert old.status_code == 401 and len(upstream.requests) == seen
