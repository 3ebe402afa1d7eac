"""``GET <base_url>/besser-agent/``: a small page a person can read, where a link to the REST root lands.

A run view says "hosted by the Jupyter server at <base_url>/besser-agent/"; a person who opens
that address used to get a JSON 404. The page says what ``GET config`` says a person may want
(version, where runs live, how many run and wait, whether shell tools are offered), behind the
same authentication as every other route, and shows no key, token or path outside the server's
root (the runs folder is named relative to the root, or only said to be outside it).
"""

from __future__ import annotations

import html
import os

from jupyter_server.auth.decorator import authorized
from tornado import web

from kernel_ext.safetext import plural
from kernel_ext.server.handlers.base import BesserHandler
from kernel_ext.server.report import describe_runs
from kernel_ext.version import __version__


def runs_dir_shown(runs_dir: str, root_dir: str) -> str:
    """The runs folder as the person's file browser names it, never a path outside the server's root."""
    try:
        relative = os.path.relpath(os.path.realpath(runs_dir), os.path.realpath(root_dir))
    except ValueError:  # another drive
        return "outside the server's root folder"
    if relative == os.pardir or relative.startswith(os.pardir + os.sep) or os.path.isabs(relative):
        return "outside the server's root folder"
    return "the root folder itself" if relative == os.curdir else relative


def status_page(*, version: str, runs_dir: str, running: int, queued: int, max_concurrent: int, shell_tools: bool) -> str:
    """The page's HTML: every value escaped, no script, no style (the API's CSP allows neither)."""
    rows = [
        ("version", version),
        ("runs folder", runs_dir),
        ("runs now", f"{plural(running, 'run')} running, {queued} queued (at most {max_concurrent} at once)"),
        ("shell tools", "enabled: the agent may propose commands, each on a card" if shell_tools
         else "disabled: the agent edits files and runs the generator, never a command"),
    ]
    cells = "".join(f"<tr><th scope='row'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>besser-agent</title></head><body>"
        "<h1>besser-agent is running on this Jupyter server</h1>"
        f"<table>{cells}</table>"
        "<p>Runs are started from a notebook (<code>%besser generate</code>) or the command line "
        "(<code>besser-agent generate</code>); this address is their REST root, used by the notebook's kernel.</p>"
        "</body></html>"
    )


class StatusHandler(BesserHandler):
    auth_resource = "besser-agent:config"

    @web.authenticated
    @authorized
    async def get(self) -> None:
        state = self.state
        runs = describe_runs(state.operator, state.manager)
        page = status_page(
            version=__version__,
            runs_dir=runs_dir_shown(str(state.manager.runs_dir), self.settings.get("server_root_dir") or os.getcwd()),
            running=runs["running"], queued=runs["queued"], max_concurrent=runs["max_concurrent"],
            shell_tools=bool(state.operator.shell_tools_enabled),
        )
        self.set_header("Cache-Control", "no-store")
        self.finish(page, set_content_type="text/html; charset=UTF-8")
