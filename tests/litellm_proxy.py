"""LiteLLM's proxy (1.108.7, a server this project did not write) started alone on loopback, in
front of the project's scripted upstream (tests/provider_server.py, speaking OpenAI's protocol).

One configuration serves both wire formats: ``/v1/chat/completions`` passes the OpenAI stream
on, and ``/v1/messages`` (LiteLLM's Anthropic-format endpoint) translates each Anthropic request
into a Chat Completions call to the same upstream and its stream back into Anthropic's events.
The proxy does no retry of its own (``num_retries: 0``), so an upstream 429 reaches the client.
Teardown ends the proxy by its pid (it runs in a process group of its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from hub_fixtures import LITELLM, free_port

OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-sonnet-4-5"  # the Anthropic-format name a client asks for; served by the same upstream
UPSTREAM_KEY = "sk-upstream-" + secrets.token_hex(12)
VERSION = "1.108.7"


def litellm_absent() -> str | None:
    """Why LiteLLM's proxy cannot start here (None when it can); no hub is needed for this one."""
    if not LITELLM.exists():
        return (f"LiteLLM's proxy is not installed at {LITELLM} (.ci/run installs it: python3 -m venv "
                f"{LITELLM.parent.parent} && {LITELLM.parent}/pip install 'litellm[proxy]==1.108.7' 'prisma==0.15.0')")
    return None


@dataclass
class Proxy:
    url: str
    key: str
    process: subprocess.Popen
    log_path: Path

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


def config(upstream_url: str) -> dict:
    """Both model names on the one upstream; the key by reference to the proxy's environment."""
    params = {"model": f"openai/{OPENAI_MODEL}", "api_base": upstream_url + "/v1", "api_key": "os.environ/UPSTREAM_KEY"}
    return {
        "model_list": [{"model_name": name, "litellm_params": dict(params)} for name in (OPENAI_MODEL, ANTHROPIC_MODEL)],
        # Anthropic-format requests to an OpenAI deployment go to Chat Completions, not the Responses API
        "litellm_settings": {"num_retries": 0, "request_timeout": 60, "telemetry": False,
                             "use_chat_completions_url_for_anthropic_messages": True},
        "router_settings": {"num_retries": 0, "allowed_fails": 1000},
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"},
    }


@contextlib.contextmanager
def litellm_proxy(workdir: Path, upstream_url: str, timeout: float = 240) -> Iterator[Proxy]:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "litellm_config.yaml"
    path.write_text(json.dumps(config(upstream_url), indent=2))  # JSON is YAML
    port, key = free_port(), "sk-master-" + secrets.token_hex(16)
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("OPENAI_", "ANTHROPIC_", "BESSER_", "LITELLM_"))}
    env.update({"UPSTREAM_KEY": UPSTREAM_KEY, "LITELLM_MASTER_KEY": key,
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # its price table from the package, not the network
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    log_path = workdir / "litellm.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(LITELLM), "--config", str(path), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=workdir,
            start_new_session=True)
    proxy = Proxy(f"http://127.0.0.1:{port}", key, process, log_path)
    try:
        deadline = time.monotonic() + timeout  # the proxy takes 20-40 s to load on two busy cores
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{proxy.url}/health/liveliness", timeout=2).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"LiteLLM did not start:\n{proxy.log_tail()}")
            time.sleep(0.3)
        yield proxy
    finally:
        proxy.stop()
