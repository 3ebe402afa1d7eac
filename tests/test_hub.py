"""A real JupyterHub with two users (docs/jupyterhub_config.py): configurable-http-proxy from npm,
SimpleLocalProcessSpawner, DummyAuthenticator; each single-user server loads the extension.

Proven through the hub's proxy, with each user's own hub token: alice's runs and events are
invisible to bob and forbidden to him (reading, streaming, deciding, downloading), and the
other way round. Bob's kernel, having read the token alice's server gave her kernel from
``/proc/<her kernel>/environ`` (every user is the same OS user here), is refused with it
through the proxy and on her server's direct loopback address alike. An operator key set when the hub starts reaches each single-user server's
environment, makes ``GET config`` say a provider is configured, and appears in no kernel
output, no event, no API answer and no tool environment.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from file_tool_helpers import tree_state
from hub_fixtures import (
    KernelSocket,
    output_text,
    pid_with,
    process_environ,
    proxy_missing,
    start_classroom,
    start_hub,
)

SCENARIO = {"kind": "scenario", "scenario": "side-effects"}


@pytest.fixture(scope="module")
def operator_env() -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-operator" + secrets.token_hex(20)}


@pytest.fixture(scope="module")
def hub(tmp_path_factory, operator_env):
    reason = proxy_missing()
    if reason:
        print(f"skipping the hub tests: {reason}")
        pytest.skip(reason)
    hub = start_hub(tmp_path_factory.mktemp("hub"), operator_env)
    try:
        yield hub
    finally:
        hub.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def classroom(hub):
    """Both servers started (concurrently), each user's token, each server's pid."""
    return await start_classroom(hub)


async def wait_for_pending(client, base: str, run_id: str, timeout: float = 30) -> list[str]:
    for _ in range(int(timeout / 0.1)):
        run = (await client.get(f"{base}/runs/{run_id}")).json()["run"]
        pending = [a["call_id"] for a in run["approvals"] if a["pending"]]
        if pending:
            return pending
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} never asked for an approval")


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_each_users_runs_are_invisible_and_forbidden_to_the_other(hub, classroom):
    alice, bob = classroom["tokens"]["alice"], classroom["tokens"]["bob"]
    mine, theirs = "/user/alice/besser-agent", "/user/bob/besser-agent"
    async with hub.api(alice) as as_alice, hub.api(bob) as as_bob, hub.api() as anonymous:
        started = await as_alice.post(f"{mine}/runs", json=SCENARIO)
        assert started.status_code == 201, started.text
        run_id = started.json()["run"]["id"]
        (edit_card, *_) = await wait_for_pending(as_alice, mine, run_id)

        # bob, through the proxy into alice's server: every door is closed
        for method, path in (("GET", "runs"), ("GET", f"runs/{run_id}"), ("GET", f"runs/{run_id}/events"),
                             ("GET", f"runs/{run_id}/archive"), ("GET", "config"),
                             ("POST", f"runs/{run_id}/approvals/{edit_card}"), ("POST", f"runs/{run_id}/cancel"),
                             ("POST", "runs")):
            body = {"approved": True} if "approvals" in path else (SCENARIO if path == "runs" else None)
            for client, who in ((as_bob, "bob"), (anonymous, "nobody")):
                answer = await client.request(method, f"{mine}/{path}", json=body)
                assert answer.status_code == 403, f"{who}: {method} {path} -> {answer.status_code}"
                assert run_id not in answer.text

        # bob's own server knows nothing of alice's run
        listed = await as_bob.get(f"{theirs}/runs")
        assert listed.status_code == 200 and listed.json()["runs"] == []
        for method, path in (("GET", f"runs/{run_id}"), ("GET", f"runs/{run_id}/events"),
                             ("POST", f"runs/{run_id}/approvals/{edit_card}")):
            answer = await as_bob.request(method, f"{theirs}/{path}", json={"approved": True} if method == "POST" else None)
            assert answer.status_code == 404 and answer.json()["code"] == "RUN_NOT_FOUND", answer.text

        # and alice cannot reach bob's server either
        assert (await as_alice.get(f"{theirs}/runs")).status_code == 403

        # the card is still open: only alice decides it, and her run ends as she chose
        decided = await as_alice.post(f"{mine}/runs/{run_id}/approvals/{edit_card}", json={"approved": True})
        assert decided.status_code == 200, decided.text
        test_card = next(c for c in await wait_for_pending(as_alice, mine, run_id) if c != edit_card)
        assert (await as_alice.post(f"{mine}/runs/{run_id}/approvals/{test_card}", json={"approved": True})).status_code == 200
        stream = await as_alice.get(f"{mine}/runs/{run_id}/events")
        assert stream.status_code == 200 and "event: done" in stream.text and '"status":"completed"' in stream.text.replace(" ", "")
        resolved = [json.loads(line[6:]) for line in stream.text.splitlines() if line.startswith("data: ") and "approval_resolved" in line]
        assert [e["approved"] for e in resolved] == [True, True]

    users = hub.state_dir / "users"
    assert (users / "alice" / "besser_runs" / run_id / "events.jsonl").is_file()
    assert not (users / "bob" / "besser_runs" / run_id).exists()


THIEF = r"""
import json
from pathlib import Path
import httpx
raw = Path("/proc/{pid}/environ").read_bytes().decode(errors="replace")
env = dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)
token, direct = env["BESSER_AGENT_TOKEN"], env["BESSER_AGENT_URL"]
def answer(method, url, body=None):
    try:
        a = httpx.request(method, url, json=body, headers={{"Authorization": f"token {{token}}"}}, timeout=60)
    except httpx.HTTPError as exc:
        return ["failed", repr(exc)]
    return [a.status_code, a.json().get("code") if "json" in a.headers.get("content-type", "") else a.text[:200]]
seen = {{route: [answer("GET", base + "runs"), answer("GET", base + "runs/{run_id}/archive"),
                 answer("POST", base + "runs", {{"kind": "scenario"}})]
        for route, base in (("proxy", "{proxy}"), ("direct", direct))}}
print("SEEN " + json.dumps(seen))
"""


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_a_kernel_token_read_from_proc_is_refused_to_another_users_kernel(hub, classroom):
    alice, bob = classroom["tokens"]["alice"], classroom["tokens"]["bob"]
    mine = "/user/alice/besser-agent"
    async with hub.api(alice) as as_alice:
        started = await as_alice.post(f"{mine}/runs", json=SCENARIO)
        assert started.status_code == 201, started.text
        run_id = started.json()["run"]["id"]
        await wait_for_pending(as_alice, mine, run_id)
        listed = (await as_alice.get(f"{mine}/runs")).json()["runs"]
    runs = hub.state_dir / "users" / "alice" / "besser_runs"
    before = tree_state(runs)
    async with KernelSocket(hub, "alice", alice) as hers, KernelSocket(hub, "bob", bob) as his:
        code = THIEF.format(pid=pid_with(hers.kernel_id), proxy=f"{hub.url}{mine}/", run_id=run_id)
        reply, outputs = await his.execute(code)
        assert reply["status"] == "ok", output_text(outputs)
        stolen = json.loads(next(x for x in output_text(outputs).splitlines() if x.startswith("SEEN "))[5:])
        refused = [403, "CAPABILITY_REFUSED"]
        assert stolen == {"proxy": [refused] * 3, "direct": [refused] * 3}
        assert tree_state(runs) == before  # no run started, nothing written

        # alice's own kernel still reaches her server directly with it (not through the proxy)
        reply, outputs = await hers.execute(code.replace(f"/proc/{pid_with(hers.kernel_id)}/", "/proc/self/"))
        own = json.loads(next(x for x in output_text(outputs).splitlines() if x.startswith("SEEN "))[5:])
        assert own["proxy"] == [refused] * 3
        assert [status for status, _ in own["direct"]] == [200, 200, 201]
    async with hub.api(alice) as as_alice:  # her hub credential works through the proxy as before
        after = (await as_alice.get(f"{mine}/runs")).json()["runs"]
        assert {r["id"] for r in listed} < {r["id"] for r in after}
        for run in after:
            await as_alice.post(f"{mine}/runs/{run['id']}/cancel", json={})


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
async def test_operator_keys_reach_the_server_but_no_output_event_or_tool(hub, classroom, operator_env):
    key = operator_env["OPENAI_API_KEY"]
    server_env = process_environ(classroom["pids"]["alice"])
    assert server_env.get("OPENAI_API_KEY") == key  # the operator's key reached alice's server
    alice = classroom["tokens"]["alice"]
    async with hub.api(alice) as as_alice:
        config = await as_alice.get("/user/alice/besser-agent/config")
        described = config.json()["provider"]
        assert described["configured"] is True and described["provider"] == "openai"
        assert config.json()["sandbox"]["tier"] in ("bwrap", "landlock")  # what docs/jupyterhub.md says to check

    cells = [
        "%load_ext kernel_ext\n%besser config",
        "from widgets.lesson import answer_cards\nview = %besser scenario side-effects\ndisplay(view)",
        "state = await answer_cards(view, 'scripted')\nprint(view.to_text())",
        (
            "import tempfile\nfrom pathlib import Path\nfrom kernel_ext.sandbox import ShellService\n"
            "shell = ShellService(Path(tempfile.mkdtemp()), enabled=True)\n"
            "record = shell.run('env')\nshell.close()\n"
            "print('tier', record.tier, 'exit', record.exit_code, 'scrubbed', record.secrets_removed)\nprint(record.stdout.text)"
        ),
    ]
    texts = []
    async with KernelSocket(hub, "alice", alice) as kernel:
        kernel_env = process_environ(pid_with(kernel.kernel_id))
        assert kernel_env["BESSER_AGENT_URL"].endswith("/user/alice/besser-agent/")  # server mode, not in-process
        capability = kernel_env["BESSER_AGENT_TOKEN"]  # the token alice's server hands its kernels
        for code in cells:
            reply, outputs = await kernel.execute(code)
            assert reply["status"] == "ok", f"{code!r}: {reply.get('ename')}: {reply.get('evalue')}"
            texts.append(output_text(outputs))

    assert "mode: server" in texts[0] and '"configured": true' in texts[0]
    assert "hosted by the Jupyter server at /user/alice/besser-agent/" in texts[1]  # a path the browser opens behind the proxy
    assert "127.0.0.1" not in texts[1] and "localhost" not in texts[1]
    assert "done: completed" in texts[2]
    tool = texts[3]
    assert "exit 0" in tool and "HOME=" in tool and "OPENAI_API_KEY" not in tool and "BESSER_AGENT_TOKEN" not in tool
    assert int(tool.split("scrubbed ")[1].split()[0]) >= 2  # at least the key and the capability token were removed

    async with hub.api(capability) as with_capability:  # a kernel's token opens its own extension only
        assert (await with_capability.get("/user/alice/api/contents")).status_code == 403
        assert (await with_capability.get("/user/bob/besser-agent/runs")).status_code == 403

    async with hub.api(alice) as as_alice:
        runs = (await as_alice.get("/user/alice/besser-agent/runs")).json()["runs"]
        streams = [(await as_alice.get(f"/user/alice/besser-agent/runs/{r['id']}/events")).text for r in runs]
    secrets_to_hide = (key, capability, classroom["tokens"]["alice"], classroom["tokens"]["bob"])
    logs = [p.read_text() for p in (hub.state_dir / "users" / "alice" / "besser_runs").glob("*/events.jsonl")]
    for where, text in (("kernel outputs", "\n".join(texts)), ("SSE streams", "\n".join(streams)),
                        ("event logs", "\n".join(logs)), ("config", config.text)):
        for secret in secrets_to_hide:
            assert secret not in text, f"a secret reached the {where}"


def test_the_documented_values_parse_and_name_the_switches():
    """The YAML in docs/jupyterhub.md is valid, and says what the code reads."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "jupyterhub.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", doc, flags=re.DOTALL)]
    values = blocks[0]["singleuser"]
    env = values["extraEnv"]
    assert env["OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "besser-llm", "key": "openai-api-key"}
    assert env["BESSER_LLM_ENABLE_SHELL_TOOLS"] == "0" and env["BESSER_SANDBOX"] == "auto"
    on = next(p for p in values["profileList"] if "kubespawner_override" in p)
    assert on["kubespawner_override"]["environment"]["BESSER_LLM_ENABLE_SHELL_TOOLS"] == "1"
    assert blocks[1]["singleuser"]["extraPodConfig"]["runtimeClassName"] == "gvisor"
    from kernel_ext.sandbox.config import ENABLE_VAR, POLICY_VAR, PROGRAMS_VAR

    for name in (ENABLE_VAR, POLICY_VAR, PROGRAMS_VAR, "/besser-agent/config"):
        assert name in doc


def test_the_sizing_values_follow_from_the_measured_table_and_the_sandbox_limits():
    """Section 9's Z2JH values cover what the capacity bench measured and the sandboxes may hold."""
    from kernel_ext.hosting.options import RUN_LIMIT_ENV
    from kernel_ext.sandbox.resource_caps import DEFAULT_MAX_TASKS
    from kernel_ext.sandbox.shares import DEFAULT_MEMORY

    doc = (Path(__file__).resolve().parent.parent / "docs" / "jupyterhub.md").read_text()
    sizing = doc.split("## 9. Sizing", 1)[1]
    values, kubelet = (yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", sizing, flags=re.DOTALL))
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in sizing.splitlines() if re.match(r"\| \d+ \|", line)]
    assert rows and all(done.split("/")[0] == done.split("/")[1] for _, done, *_ in rows)  # the quoted runs all completed
    peak_mib = max(float(re.search(r"\((\d+)\) MiB", row[7]).group(1)) for row in rows)  # peak RSS / server, max

    def mib(size: str) -> float:
        return float(size[:-1]) * {"M": 1, "G": 1024}[size[-1]]

    memory, cpu = values["singleuser"]["memory"], values["singleuser"]["cpu"]
    assert mib(memory["guarantee"]) >= peak_mib
    assert mib(memory["limit"]) >= mib(memory["guarantee"]) + DEFAULT_MEMORY / 2**20  # one sandbox at its cap fits
    assert 0 < cpu["guarantee"] <= cpu["limit"]
    runs = int(values["singleuser"]["extraEnv"][RUN_LIMIT_ENV])
    assert kubelet["podPidsLimit"] > runs * 3 * DEFAULT_MAX_TASKS  # above what the sandboxes may hold together
