"""Links to a run's files that open them in the notebook's own front end, never a second one.

A run view is HTML in two places: a live ipywidget (its HTML set as is, no link handling) and a
finished run's static output (rendered by JupyterLab's rendermime, which resolves a relative
link against the notebook's folder and opens it in place). A plain relative link in the live
widget resolved against the page's URL (``/lab/tree/NOTEBOOK``) and, with ``target=_blank``,
opened a second JupyterLab in a new tab. So a file's link also names the front end's
``docmanager:open`` command and the file's path in the contents API (relative to the server's
root, which the server extension publishes to its kernels as ``BESSER_AGENT_ROOT``): JupyterLab
and Notebook 7 run a command named by ``data-commandlinker-*`` on a click anywhere in the page
(their ``CommandLinker``), so the file opens in JupyterLab's main area, or in Notebook 7's
editor. The ``href`` stays for every other viewer (nbconvert's HTML beside the run folder).

``run_dir`` and file names come from events (a replayed ``events.jsonl`` may be crafted), so
a link is only ever a relative path or a path under an http(s) or same-origin ``link_base``
(every segment percent-encoded: ``javascript:`` cannot become a scheme), the command is a
literal, and a path outside the server's root gets no command; anything else is plain text.
"""

from __future__ import annotations

import html
import json
import os
from urllib.parse import quote, urlsplit

from kernel_ext.server.auth import ENV_ROOT
from widgets.escape import esc
from widgets.state import RunViewState

OPEN_COMMAND = "docmanager:open"  # JupyterLab's and Notebook 7's command that opens a path in place


def file_link(state: RunViewState, relative: str, link_base: str | None, label: str | None = None) -> str:
    """An ``<a>`` for a run file (``relative`` to its app folder; "" for the run folder itself)."""
    href = file_href(state.run_dir, relative, link_base)
    text = esc(label or relative)
    if href is None:
        return text
    path = contents_path(state.run_dir, relative, os.environ.get(ENV_ROOT)) if relative else None
    if path is None:  # a folder, or no known root: the front end follows the href (a new tab, as before)
        return f'<a href="{esc(href)}" target="_blank">{text}</a>'
    args = html.escape(json.dumps({"path": path}), quote=True)  # ASCII JSON (json.dumps escapes the rest)
    return (f'<a href="{esc(href)}" data-commandlinker-command="{OPEN_COMMAND}" '
            f'data-commandlinker-args="{args}" title="open {esc(path)}">{text}</a>')


def contents_path(run_dir: str, relative: str, root: str | None) -> str | None:
    """The file's path in the Jupyter contents API (under ``root``), or None when it is not under it."""
    if not root or not run_dir:
        return None
    target = os.path.realpath(os.path.join(run_dir, "app", relative))  # a link out of the root is out
    try:
        inside = os.path.relpath(target, os.path.realpath(root))
    except ValueError:  # another drive
        return None
    if inside in (os.curdir, os.pardir) or inside.startswith(os.pardir + os.sep) or os.path.isabs(inside):
        return None
    return inside.replace(os.sep, "/")


def file_href(run_dir: str, relative: str, link_base: str | None) -> str | None:
    """The URL of a run file, or None when no safe one exists."""
    target = os.path.join(run_dir, "app", relative) if relative else run_dir
    if link_base is None:
        try:
            target = os.path.relpath(target)
        except ValueError:
            return None
        if not target or os.path.isabs(target) or target.startswith(("/", "\\")):
            return None
        return quote(target.replace("\\", "/"), safe="/")
    base = urlsplit(link_base)
    if base.scheme not in ("", "http", "https") or (not base.scheme and base.netloc):
        return None  # e.g. javascript:, data:, or a protocol-relative //host
    return link_base.rstrip("/") + "/" + quote(target.replace("\\", "/").lstrip("/"), safe="/")
