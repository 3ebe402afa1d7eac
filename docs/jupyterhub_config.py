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
- Operator settings: the provider keys and ``BESSER_LLM_*`` / ``BESSER_SANDBOX`` variables
  present when the hub starts are handed to every single-user server (and only those).

Knobs, all optional: ``BESSER_HUB_DIR`` (state and users' folders, default ``.hub``),
``BESSER_HUB_PORT`` (8000), ``BESSER_HUB_API_PORT`` (8001), ``BESSER_HUB_INTERNAL_PORT``
(8081), ``BESSER_HUB_PASSWORD`` (classroom), ``BESSER_HUB_ADMIN_TOKEN`` (registers a service
holding this token that may start servers and issue user tokens: for scripts and the test).
"""

import os
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
OPERATOR_PREFIXES = ("BESSER_LLM_",)

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
c.Authenticator.allowed_users = {"alice", "bob"}

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
    if name in OPERATOR_VARIABLES or name.startswith(OPERATOR_PREFIXES)
}


def copy_notebooks(spawner):
    """Give each new user the teaching notebooks (an existing copy is never overwritten)."""
    target = Path(spawner.home_dir) / "notebooks"
    target.mkdir(parents=True, exist_ok=True)
    for notebook in sorted((REPO / "notebooks").glob("*.ipynb")):
        if not (target / notebook.name).exists():
            shutil.copyfile(notebook, target / notebook.name)


c.Spawner.pre_spawn_hook = copy_notebooks

# -- an optional automation token (scripts, tests) -----------------------------------------------
if os.environ.get("BESSER_HUB_ADMIN_TOKEN"):
    c.JupyterHub.services = [{"name": "classroom-admin", "api_token": os.environ["BESSER_HUB_ADMIN_TOKEN"]}]
    c.JupyterHub.load_roles = [
        {
            "name": "classroom-admin",
            "scopes": ["list:users", "read:users", "admin:servers", "tokens"],
            "services": ["classroom-admin"],
        }
    ]
