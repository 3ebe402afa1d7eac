"""A local JupyterHub with two users, alice and bob, whose servers load the besser-agent extension.

For trying the classroom set-up on one machine, and for ``tests/test_hub.py``; not for
production (see docs/jupyterhub.md for Zero-to-JupyterHub). Start it from the repository root:

    npm install -g configurable-http-proxy      # once: the hub's proxy comes from npm
    .venv/bin/jupyterhub -f docs/jupyterhub_config.py

then open http://127.0.0.1:8000 and log in as alice or bob (password: classroom).

- Authenticator: JupyterHub's DummyAuthenticator (one shared password; testing only).
- Spawner: SimpleLocalProcessSpawner. Every user's server runs as the hub's own OS user, in
  its own folder (``<state>/users/<name>``), so each has its own ``besser_runs/``. It gives no
  OS isolation between users: the extension's per-user separation rests on the hub's tokens
  and those separate folders. On a shared machine use system users (LocalProcessSpawner) or
  one pod per user (KubeSpawner).
- Operator settings: the provider keys and ``BESSER_LLM_*`` / ``BESSER_SANDBOX`` /
  ``BESSER_SANDBOX_*`` variables present when the hub starts are handed to every single-user
  server (and only those).

- The key stays with the hub (``BESSER_HUB_GATEWAY=litellm``): the provider keys go to an LLM
  gateway (LiteLLM's proxy) that the hub runs as a managed service, and never to a student's
  server. Each server gets, through its environment, a key of its own issued by the gateway for
  that student (the student's budget is kept by the gateway) and the gateway's URL as
  ``OPENAI_BASE_URL``. No key can be issued: the server does not start (fail closed).

Knobs, all optional: ``BESSER_HUB_DIR`` (state and users' folders, default ``.hub``),
``BESSER_HUB_PORT`` (8000), ``BESSER_HUB_API_PORT`` (8001), ``BESSER_HUB_INTERNAL_PORT``
(8081), ``BESSER_HUB_PASSWORD`` (classroom), ``BESSER_HUB_USERS`` (who may log in, comma-separated;
default ``alice,bob``; bench/bench_hub_capacity.py makes a class of its own),
``BESSER_HUB_ADMIN_TOKEN`` (registers a service holding this token that may start servers and
issue user tokens: for scripts and the test).
The gateway's: ``BESSER_HUB_GATEWAY`` (``litellm``; unset: no gateway, the keys go to every
server as before), ``BESSER_HUB_GATEWAY_PORT`` (4000, loopback), ``BESSER_HUB_STUDENT_BUDGET_USD``
(1.00 per student), ``BESSER_HUB_STUDENT_BUDGET_DURATION`` (e.g. ``30d``; unset: never reset),
``LITELLM_MASTER_KEY`` (the gateway's admin key; unset: made once and kept in the state folder),
``DATABASE_URL`` (the gateway's Postgres store of keys and spend), ``BESSER_HUB_LITELLM`` (the
``litellm`` program, e.g. in a venv of its own; default: on PATH), ``BESSER_HUB_GATEWAY_CMD``
(a JSON list: another command that serves LiteLLM's proxy API on the port, with the same
environment).
"""

import json
import os
import secrets
import shutil
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

REPO = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("BESSER_HUB_DIR", ".hub")).resolve()
USERS = STATE / "users"
USERS.mkdir(parents=True, exist_ok=True)

# Variables the operator may set for the single-user servers (keys stay out of notebooks and
# tool environments: the extension redacts them and the sandbox scrubs them).
OPERATOR_VARIABLES = (
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "BESSER_SANDBOX",
)
OPERATOR_PREFIXES = ("BESSER_LLM_", "BESSER_SANDBOX_")  # BESSER_SANDBOX_*: the fair shares and task cap
# With a gateway these stay with the hub: the gateway holds them, students get keys of their own.
PROVIDER_SECRETS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
GATEWAY = os.environ.get("BESSER_HUB_GATEWAY", "").strip().lower()
if GATEWAY not in ("", "litellm"):
    raise SystemExit(f"BESSER_HUB_GATEWAY={GATEWAY!r}: the gateway this set-up knows is 'litellm'")

# -- where the hub listens (loopback only) ------------------------------------------------------
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = int(os.environ.get("BESSER_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ.get("BESSER_HUB_INTERNAL_PORT", "8081"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{int(os.environ.get('BESSER_HUB_API_PORT', '8001'))}"
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = True

# -- who may log in --------------------------------------------------------------------------
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = os.environ.get("BESSER_HUB_PASSWORD", "classroom")
c.Authenticator.allowed_users = {name.strip() for name in os.environ.get("BESSER_HUB_USERS", "alice,bob").split(",")
                                 if name.strip()}

# -- how a user's server starts -----------------------------------------------------------------
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = str(USERS / "{username}")
c.Spawner.notebook_dir = str(USERS / "{username}")
c.Spawner.cmd = [str(Path(sys.executable).with_name("jupyterhub-singleuser"))]
c.Spawner.args = ["--allow-root"] if os.getuid() == 0 else []  # a root hub starts root servers
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.Spawner.environment = {
    name: value
    for name, value in os.environ.items()
    if (name in OPERATOR_VARIABLES or name.startswith(OPERATOR_PREFIXES)) and not (GATEWAY and name in PROVIDER_SECRETS)
}


def copy_notebooks(spawner):
    """Give each new user the teaching notebooks (an existing copy is never overwritten)."""
    target = Path(spawner.home_dir) / "notebooks"
    target.mkdir(parents=True, exist_ok=True)
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        if not (target / notebook.name).exists():
            shutil.copyfile(notebook, target / notebook.name)


services: list[dict] = []

# -- the LLM gateway: the key stays with the hub (docs/jupyterhub.md, section 8) --------------------
if GATEWAY:
    GATEWAY_URL = f"http://127.0.0.1:{int(os.environ.get('BESSER_HUB_GATEWAY_PORT', '4000'))}"
    MODEL = os.environ.get("BESSER_LLM_MODEL", "gpt-4o-mini")
    BUDGET_USD = float(os.environ.get("BESSER_HUB_STUDENT_BUDGET_USD", "1.00"))
    MASTER_KEY_FILE = STATE / "gateway_master_key"
    if not os.environ.get("LITELLM_MASTER_KEY") and not MASTER_KEY_FILE.exists():
        MASTER_KEY_FILE.touch(mode=0o600)
        MASTER_KEY_FILE.write_text("sk-" + secrets.token_urlsafe(32))
    MASTER_KEY = os.environ.get("LITELLM_MASTER_KEY") or MASTER_KEY_FILE.read_text().strip()
    # LiteLLM's proxy configuration (JSON is YAML): one model, the operator's key and upstream by
    # reference to the service's environment, keys and spend in its Postgres store
    upstream = {"api_base": os.environ["OPENAI_BASE_URL"]} if os.environ.get("OPENAI_BASE_URL") else {}
    (STATE / "litellm_config.yaml").write_text(json.dumps({
        "model_list": [{"model_name": MODEL,
                        "litellm_params": {"model": f"openai/{MODEL}", "api_key": "os.environ/OPENAI_API_KEY", **upstream}}],
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY", "database_url": "os.environ/DATABASE_URL"},
    }, indent=2))
    port = GATEWAY_URL.rsplit(":", 1)[1]
    command = json.loads(os.environ["BESSER_HUB_GATEWAY_CMD"]) if os.environ.get("BESSER_HUB_GATEWAY_CMD") else [
        os.environ.get("BESSER_HUB_LITELLM") or shutil.which("litellm") or "litellm",
        "--config", str(STATE / "litellm_config.yaml"), "--host", "127.0.0.1", "--port", port,
    ]
    # the only process that holds the operator's key; not proxied by the hub (no "url")
    services.append({
        "name": "llm-gateway",
        "command": command,
        "cwd": str(STATE),
        "environment": {
            "LITELLM_MASTER_KEY": MASTER_KEY,
            "GATEWAY_PORT": port,
            **{name: os.environ[name] for name in (*PROVIDER_SECRETS, "DATABASE_URL", "BESSER_LLM_MODEL", "HOME")
               if os.environ.get(name)},
            **{name: value for name, value in os.environ.items() if name.startswith("LITELLM_")},  # its own settings
        },
    })


async def issue_gateway_key(spawner) -> None:
    """Give the student's server a gateway key of its own (the previous one is revoked) and the
    gateway's URL. The budget is the student's, kept by the gateway across keys and restarts.
    Any refusal stops the spawn: the server never starts with no key, or the operator's."""
    import asyncio

    import httpx

    user, alias = spawner.user.name, f"besser-{spawner.user.name}"
    budget = {"max_budget": BUDGET_USD}
    if os.environ.get("BESSER_HUB_STUDENT_BUDGET_DURATION"):
        budget["budget_duration"] = os.environ["BESSER_HUB_STUDENT_BUDGET_DURATION"]
    async with httpx.AsyncClient(base_url=GATEWAY_URL, headers={"Authorization": f"Bearer {MASTER_KEY}"},
                                 timeout=30, trust_env=False) as gateway:
        for _ in range(240):  # the gateway starts with the hub and may still be loading
            try:
                if (await gateway.get("/health/liveliness")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.5)
        steps = (
            ("/user/new", {"user_id": user, "user_role": "internal_user", "auto_create_key": False, **budget}, (200, 409)),
            ("/key/delete", {"key_aliases": [alias]}, (200, 400, 404)),  # nothing to revoke is fine
            ("/key/generate", {"user_id": user, "key_alias": alias, "models": [MODEL],
                               "metadata": {"issued_by": "jupyterhub"}}, (200,)),
        )
        for path, body, expected in steps:
            try:
                answer = await gateway.post(path, json=body)
            except httpx.HTTPError as exc:
                raise RuntimeError(f"the LLM gateway at {GATEWAY_URL} did not answer {path} ({type(exc).__name__}); "
                                   f"the server of {user} is not started without a key of its own") from None
            if answer.status_code not in expected:
                raise RuntimeError(f"the LLM gateway refused {path} for {user} (HTTP {answer.status_code}): "
                                   f"{answer.text[:300]}; the server is not started without a key of its own")
        key = answer.json().get("key")
    if not isinstance(key, str) or not key or key == MASTER_KEY:
        raise RuntimeError(f"the LLM gateway issued no key for {user}; the server is not started")
    spawner.environment = {  # a new dict: the configured one is shared by every spawner
        **spawner.environment, "OPENAI_API_KEY": key, "OPENAI_BASE_URL": f"{GATEWAY_URL}/v1",
        "BESSER_LLM_PROVIDER": os.environ.get("BESSER_LLM_PROVIDER", "openai"),
    }


async def revoke_gateway_key(spawner) -> None:
    """The key dies with the server (the student's spend stays with the gateway)."""
    import httpx

    async with httpx.AsyncClient(base_url=GATEWAY_URL, headers={"Authorization": f"Bearer {MASTER_KEY}"},
                                 timeout=10, trust_env=False) as gateway:
        try:
            await gateway.post("/key/delete", json={"key_aliases": [f"besser-{spawner.user.name}"]})
        except httpx.HTTPError:
            spawner.log.warning("the gateway key of %s could not be revoked", spawner.user.name)


async def prepare_server(spawner) -> None:
    copy_notebooks(spawner)
    if GATEWAY:
        await issue_gateway_key(spawner)


c.Spawner.pre_spawn_hook = prepare_server
if GATEWAY:
    c.Spawner.post_stop_hook = revoke_gateway_key

# -- an optional automation token (scripts, tests) -----------------------------------------------
roles: list[dict] = []
if os.environ.get("BESSER_HUB_ADMIN_TOKEN"):
    services.append({"name": "classroom-admin", "api_token": os.environ["BESSER_HUB_ADMIN_TOKEN"]})
    roles.append({
        "name": "classroom-admin",
        "scopes": ["list:users", "read:users", "admin:servers", "tokens"],
        "services": ["classroom-admin"],
    })
c.JupyterHub.services = services
c.JupyterHub.load_roles = roles
