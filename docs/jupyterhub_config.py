"""A local JupyterHub with two users, alice and bob, whose servers load the besser-agent extension.

For trying the classroom set-up on one machine, and for the hub tests; not for production (see
docs/jupyterhub.md for Zero-to-JupyterHub). Start it from the repository root:

    npm install -g configurable-http-proxy      # once: the hub's proxy comes from npm
    useradd -m alice && useradd -m bob          # once: each student is an OS user of their own
    sudo .venv/bin/jupyterhub -f docs/jupyterhub_config.py

then open http://127.0.0.1:8000 and log in as alice or bob (password: classroom).

- Authenticator: JupyterHub's DummyAuthenticator (one shared password; testing only).
- Spawner (``BESSER_HUB_SPAWNER``):
  ``system`` (the default): LocalProcessSpawner. Each student's server runs as that student's OS
  user, in their home (made private, 0700); the hub, its proxy and the gateway run as the hub's
  account (root), so a student's kernel can read neither their environments nor their files nor
  another student's. Needs a root hub and an OS user per allowed name (not root).
  ``shared``: SimpleLocalProcessSpawner, every server the hub's own OS user, in
  ``<state>/users/<name>``. Any user's kernel can then read the hub's keys, the gateway's and the
  other users' (``/proc/<pid>/environ``) and files: for one person trying it alone, never a class.
- Everything the hub writes is its account's alone: the state folder is 0700, its files 0600
  (the hub runs with umask 077, and so do the processes it starts).
- Operator settings: the provider keys and ``BESSER_LLM_*`` / ``BESSER_SANDBOX`` /
  ``BESSER_SANDBOX_*`` variables present when the hub starts are handed to every single-user
  server (and only those).

- The key stays with the hub (``BESSER_HUB_GATEWAY=litellm``): the provider keys go to an LLM
  gateway (LiteLLM's proxy) that the hub runs as a managed service, and never to a student's
  server. Each server gets, through its environment, a key of its own issued by the gateway for
  that student (the student's budget is kept by the gateway) and the gateway's URL as
  ``OPENAI_BASE_URL``. No key can be issued: the server does not start (fail closed). With
  ``shared`` servers this holds against the notebook, not against the user: any kernel reads
  the gateway's environment.

Knobs, all optional: ``BESSER_HUB_SPAWNER`` (``system``; ``shared``), ``BESSER_HUB_DIR`` (state,
and the users' folders when shared, default ``.hub``),
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

import asyncio
import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

REPO = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("BESSER_HUB_DIR", ".hub")).resolve()
USERS = STATE / "users"
SPAWNER = os.environ.get("BESSER_HUB_SPAWNER", "system").strip().lower()
ALLOWED = {name.strip() for name in os.environ.get("BESSER_HUB_USERS", "alice,bob").split(",") if name.strip()}
if SPAWNER not in ("system", "shared"):
    raise SystemExit(f"BESSER_HUB_SPAWNER={SPAWNER!r}: 'system' (one OS user per student) or 'shared' (one person trying it)")

# -- who runs as whom: a student's kernel must not read the hub's, the gateway's or another's keys --
if SPAWNER == "system":
    if os.getuid() != 0:
        raise SystemExit("BESSER_HUB_SPAWNER=system (the default) starts each student's server as their own OS "
                         "user, which needs the hub run as root; for one person trying it alone, "
                         "BESSER_HUB_SPAWNER=shared (docs/jupyterhub.md, section 7)")
    accounts = {}
    for name in sorted(ALLOWED):
        try:
            accounts[name] = pwd.getpwnam(name)
        except KeyError:
            raise SystemExit(f"no OS user {name!r} for BESSER_HUB_USERS: create it (useradd -m {name}) "
                             "or leave it out") from None
        if accounts[name].pw_uid in (0, os.getuid()):
            raise SystemExit(f"the student {name!r} is the hub's own account: it would read the hub's keys")
else:
    print(f"BESSER_HUB_SPAWNER=shared: every server runs as {pwd.getpwuid(os.getuid()).pw_name}, the hub's "
          "own OS user; each user's kernel can read the hub's, the gateway's and the other users' keys and "
          "files. For one person trying it alone, never a class.", file=sys.stderr)

# -- everything the hub writes is its account's alone (the database, the cookie secret, the
# gateway's configuration and master key): umask 077 here and in every process it starts
os.umask(0o077)
STATE.mkdir(mode=0o700, parents=True, exist_ok=True)
for entry in (STATE, *STATE.iterdir()):
    info = os.lstat(entry)
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
        raise SystemExit(f"{entry} is a link or not the hub's own: the hub keeps its state only in its own files")
    os.chmod(entry, 0o700 if stat.S_ISDIR(info.st_mode) else 0o600)


def write_private(path: Path, text: str) -> None:
    """Write one of the hub's files: the hub's account alone reads it (0600), never through a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(fd, 0o600)
        handle.write(text)


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
c.Authenticator.allowed_users = ALLOWED

# -- how a user's server starts -----------------------------------------------------------------
if SPAWNER == "system":
    c.JupyterHub.spawner_class = "localprocess"  # as the student's OS user, in their home
else:
    USERS.mkdir(mode=0o700, exist_ok=True)
    c.JupyterHub.spawner_class = "simple"
    c.SimpleLocalProcessSpawner.home_dir_template = str(USERS / "{username}")
    c.Spawner.notebook_dir = str(USERS / "{username}")
    c.Spawner.args = ["--allow-root"] if os.getuid() == 0 else []  # a root hub starts root servers
c.Spawner.cmd = [str(Path(sys.executable).with_name("jupyterhub-singleuser"))]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.Spawner.environment = {
    name: value
    for name, value in os.environ.items()
    if (name in OPERATOR_VARIABLES or name.startswith(OPERATOR_PREFIXES)) and not (GATEWAY and name in PROVIDER_SECRETS)
}


# run as the student: their home private (or the spawn stops), the teaching notebooks copied in
# where the student may write (an existing copy, or a link in its place, is never overwritten);
# arguments: the source folder, the home
COPY_NOTEBOOKS = """
import os, shutil, sys
source, home = sys.argv[1], sys.argv[2]
os.makedirs(home, mode=0o700, exist_ok=True)
os.chmod(home, 0o700)
target = os.path.join(home, "notebooks")
try:
    os.makedirs(target, exist_ok=True)
    for name in sorted(os.listdir(source)):
        if name.endswith(".ipynb") and not os.path.lexists(os.path.join(target, name)):
            shutil.copyfile(os.path.join(source, name), os.path.join(target, name))
except OSError as error:
    print(f"the notebooks were not copied: {error}", file=sys.stderr)
"""


async def copy_notebooks(spawner) -> None:
    """Give each new user a private home with the teaching notebooks. With system users the copy
    runs as the student, so the hub (root) never writes where a student's link could point."""
    if SPAWNER == "system":
        account = pwd.getpwnam(spawner.user.name)
        home, as_student = account.pw_dir, {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    else:
        home, as_student = spawner.home_dir, {}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-c", COPY_NOTEBOOKS, str(REPO / "notebooks"), home, cwd="/",
        env={"PATH": os.defpath}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        **as_student,
    )
    _, said = await asyncio.wait_for(process.communicate(), 60)
    if process.returncode:
        raise RuntimeError(f"the home of {spawner.user.name} could not be made private: "
                           f"{said.decode(errors='replace')[-300:]}")
    if said:
        spawner.log.warning("%s: %s", spawner.user.name, said.decode(errors="replace")[-300:])


services: list[dict] = []

# -- the LLM gateway: the key stays with the hub (docs/jupyterhub.md, section 8) --------------------
if GATEWAY:
    GATEWAY_URL = f"http://127.0.0.1:{int(os.environ.get('BESSER_HUB_GATEWAY_PORT', '4000'))}"
    MODEL = os.environ.get("BESSER_LLM_MODEL", "gpt-4o-mini")
    BUDGET_USD = float(os.environ.get("BESSER_HUB_STUDENT_BUDGET_USD", "1.00"))
    MASTER_KEY_FILE = STATE / "gateway_master_key"
    if not os.environ.get("LITELLM_MASTER_KEY") and not MASTER_KEY_FILE.exists():
        write_private(MASTER_KEY_FILE, "sk-" + secrets.token_urlsafe(32))
    MASTER_KEY = os.environ.get("LITELLM_MASTER_KEY") or MASTER_KEY_FILE.read_text().strip()
    # LiteLLM's proxy configuration (JSON is YAML): one model, the operator's key and upstream by
    # reference to the service's environment, keys and spend in its Postgres store
    upstream = {"api_base": os.environ["OPENAI_BASE_URL"]} if os.environ.get("OPENAI_BASE_URL") else {}
    write_private(STATE / "litellm_config.yaml", json.dumps({
        "model_list": [{"model_name": MODEL,
                        "litellm_params": {"model": f"openai/{MODEL}", "api_key": "os.environ/OPENAI_API_KEY", **upstream}}],
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY", "database_url": "os.environ/DATABASE_URL"},
    }, indent=2))
    port = GATEWAY_URL.rsplit(":", 1)[1]
    command = json.loads(os.environ["BESSER_HUB_GATEWAY_CMD"]) if os.environ.get("BESSER_HUB_GATEWAY_CMD") else [
        os.environ.get("BESSER_HUB_LITELLM") or shutil.which("litellm") or "litellm",
        "--config", str(STATE / "litellm_config.yaml"), "--host", "127.0.0.1", "--port", port,
    ]
    # the only process that holds the operator's key; not proxied by the hub (no "url"); it runs
    # as the hub's account, whose processes and files a student (system users) cannot read
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
    await copy_notebooks(spawner)
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
