"""The classroom gateway for real: LiteLLM's proxy (1.108.7; .ci/run installs it in a venv of its
own) as the hub's managed service, started from docs/jupyterhub_config.py's own command line and
generated configuration.

What runs here: the proxy starts with the hub's configuration and holds the operator's key; the
project's OpenAI-compatible provider streams a reply through it from the loopback upstream, which
sees the operator's key and only it. What cannot: LiteLLM keeps virtual keys and budgets in its
Postgres store through Prisma, whose engines cannot be fetched on this machine (docs/jupyterhub.md,
section 8). Without that store LiteLLM refuses to create the student (HTTP 400, "DB not
connected"), and the hub then refuses to start the student's server: never with no key of its
own, never with the operator's (fail closed). tests/test_hub_gateway.py runs the students' side
with a labelled stand-in of the proxy's API in the same service slot.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest
from hub_fixtures import (
    LITELLM,
    free_port,
    litellm_missing,
    pid_with,
    process_environ,
    start_hub,
    upstream_holding,
    wait_for_gateway,
)
from provider_server import Plan, openai_stream

from kernel_ext.providers import Conversation
from kernel_ext.providers.openai_compat import OpenAICompatProvider

REAL_KEY = "sk-operator-" + secrets.token_hex(20)
USAGE = {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280}


@pytest.fixture(scope="module")
def upstream():
    with upstream_holding(REAL_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def hub(tmp_path_factory, upstream):
    reason = litellm_missing()
    if reason:
        pytest.skip(reason)
    port = free_port()
    hub = start_hub(tmp_path_factory.mktemp("hub"), {
        "OPENAI_API_KEY": REAL_KEY,
        "OPENAI_BASE_URL": upstream.url + "/v1",
        "BESSER_LLM_MODEL": "gpt-4o-mini",
        "BESSER_HUB_GATEWAY": "litellm",
        "BESSER_HUB_GATEWAY_PORT": str(port),
        "BESSER_HUB_LITELLM": str(LITELLM),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # its price table from the package, not the network
    })
    hub.gateway = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    try:
        wait_for_gateway(hub, hub.gateway, str(hub.state_dir / "litellm_config.yaml"), timeout=240)  # type: ignore[attr-defined]
        yield hub
    finally:
        hub.stop()


@pytest.mark.slow
async def test_the_provider_streams_through_the_hubs_litellm_which_alone_holds_the_key(hub, upstream):
    gateway_env = process_environ(pid_with(str(hub.state_dir / "litellm_config.yaml")))
    assert gateway_env["OPENAI_API_KEY"] == REAL_KEY
    master = (hub.state_dir / "gateway_master_key").read_text().strip()
    assert gateway_env["LITELLM_MASTER_KEY"] == master and master != REAL_KEY
    upstream.plan(Plan(chunks=openai_stream(["through ", "the gateway"], finish="stop", usage=USAGE)))
    seen = len(upstream.requests)
    provider = OpenAICompatProvider(model="gpt-4o-mini", base_url=f"{hub.gateway}/v1", api_key=master)
    conversation = Conversation(system="You are terse.")
    conversation.user("Say where you are.")
    reply = await provider.complete(conversation)
    await provider.aclose()
    assert reply.text == "through the gateway" and reply.stop_reason == "end"
    assert reply.usage.input_tokens == 1200 and reply.usage.output_tokens == 80
    assert len(upstream.requests) == seen + 1
    assert upstream.requests[-1].headers["authorization"] == f"Bearer {REAL_KEY}"


@pytest.mark.slow
async def test_without_its_key_store_litellm_issues_no_key_and_the_student_server_does_not_start(hub):
    async with hub.api(hub.admin_token) as admin:
        await admin.post("/hub/api/users/alice/server")
        for _ in range(600):
            server = (await admin.get("/hub/api/users/alice")).json().get("servers", {}).get("")
            if not server or (not server.get("pending") and not server.get("ready")):
                break
            await asyncio.sleep(0.1)
        assert not server or not server.get("ready"), server
    log = hub.log_path.read_text(errors="replace")  # the hub's, with the gateway's own output
    assert "the LLM gateway refused /user/new for alice (HTTP 400): " in log and "DB not connected" in log
    assert "not started without a key of its own" in log
    home = hub.state_dir / "users" / "alice"
    leaked = [str(p) for p in home.rglob("*") if p.is_file() and REAL_KEY.encode() in p.read_bytes()]
    assert leaked == [] and not (home / "besser_runs").exists()
