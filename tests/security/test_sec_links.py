# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""A crafted ``events.jsonl`` cannot put a ``javascript:`` or ``data:`` link in the run view.

``run_dir`` and the authorship file names come from events; a run folder copied from a course
repository (or edited by hand) holds whatever its author wrote. The run view's links are only
relative paths or paths under the operator's http(s)/same-origin ``link_base``, every segment
percent-encoded. Driven through the Python API (a log reloaded from disk) and REST (the server
replays the folder's log over SSE, as a notebook after a restart follows it).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    parse_sse_text,
    runs_dir,
)

from kernel_ext.hosting.bus import EventLog
from widgets.runview import RunView

RUN_ID = "20250101-000000-c0ffee"
HOSTILE = ["javascript:alert(1)", "JaVaScRiPt:alert(2)", " javascript:alert(3)", "\tjavascript:alert(4)",
           "data:text/html,<script>alert(5)</script>", "vbscript:msgbox(6)", "//evil.invalid/x", "https://evil.invalid/y"]
LINK_BASES = [None, "/user/ann/files/", "https://hub.invalid/user/ann/files", "javascript:alert(7)//", "//evil.invalid/"]


def crafted_log(folder: Path, run_dir: str) -> Path:
    """A run's events as an attacker would write them: every name a link could be built from."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        {"seq": 1, "run_id": RUN_ID, "ts": 1.0, "type": "run_started", "request": "r", "run_dir": run_dir},
        {"seq": 2, "run_id": RUN_ID, "ts": 2.0, "type": "done", "status": "completed",
         "authorship": {"llm_authored": HOSTILE, "generator_untouched": ["ok.py"]}},
    ]
    path = folder / "events.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def hrefs(page: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(r'href\s*=\s*"([^"]*)"', page, flags=re.IGNORECASE)]


def assert_safe(page: str, link_base: str | None) -> None:
    found = hrefs(page)
    for href in found:
        stripped = href.strip().lower()
        assert not re.match(r"^[\s\x00-\x1f]*(javascript|data|vbscript):", stripped), href
        parts = urlsplit(href)
        if link_base is None:
            assert not parts.scheme and not parts.netloc and not href.startswith("/"), href
        else:
            assert href.startswith(link_base.rstrip("/") + "/"), href
            assert parts.scheme in ("", "http", "https"), href
    if link_base is not None and urlsplit(link_base).scheme not in ("", "http", "https"):
        assert not found  # a base that is no http(s) or same-origin path gives no links at all
    assert "ok.py" in page  # the names are still shown


@pytest.mark.parametrize("link_base", LINK_BASES)
@pytest.mark.parametrize("run_dir", ["javascript:alert(0)", "data:text/html,x", "runs/r1"])
def test_python_api_view_of_a_crafted_log_links_safely(world, tmp_path, run_dir, link_base):
    path = crafted_log(tmp_path / RUN_ID, run_dir)
    view = RunView(link_base=link_base).replay(EventLog.load(RUN_ID, path).events)
    assert_safe(view.to_html(), link_base)
    assert world.unchanged()


@pytest.mark.parametrize("link_base", [None, "/user/ann/files/"])
async def test_rest_replay_of_a_crafted_run_folder_links_safely(jp_fetch, runs_dir, world, link_base):
    crafted_log(runs_dir / RUN_ID, "javascript:alert(0)")
    (runs_dir / RUN_ID / "app").mkdir()
    before = (runs_dir / RUN_ID / "events.jsonl").read_bytes()
    body = (await jp_fetch("besser-agent", "runs", RUN_ID, "events")).body.decode()
    frames = [f["data"] for f in parse_sse_text(body) if "data" in f]
    assert [f["type"] for f in frames] == ["run_started", "done"]
    view = RunView(link_base=link_base).replay(frames)
    assert_safe(view.to_html(), link_base)
    assert (runs_dir / RUN_ID / "events.jsonl").read_bytes() == before
    assert world.unchanged()


def test_a_link_opens_in_place_only_for_a_file_under_the_servers_root(tmp_path, monkeypatch):
    """The ``docmanager:open`` command names a path relative to the published root, never one outside it."""
    root = tmp_path / "root"
    inside = root / "besser_runs" / RUN_ID
    (inside / "app").mkdir(parents=True)
    monkeypatch.setenv("BESSER_AGENT_ROOT", str(root))
    for run_dir, opens in ((str(inside), True), (str(tmp_path / "elsewhere"), False), (str(root / ".." / "x"), False)):
        page = RunView().replay(EventLog.load(RUN_ID, crafted_log(tmp_path / "log", run_dir)).events).to_html()
        paths = [json.loads(html.unescape(a))["path"] for a in re.findall(r'data-commandlinker-args="([^"]*)"', page)]
        if not opens:
            assert paths == [], (run_dir, paths)
            continue
        assert len(paths) >= len(HOSTILE), paths  # every crafted name is only ever a file under the run's app folder
        assert all(p.startswith(f"besser_runs/{RUN_ID}/app/") and ".." not in p.split("/") for p in paths), paths
        assert set(re.findall(r'data-commandlinker-command="([^"]*)"', page)) <= {"docmanager:open"}
        assert_safe(page, None)
