"""``GET <base_url>/besser-agent/``: the page the run view's "hosted by" line links to (issue 31, item 11).

Over a real ``jupyter server`` process (server_process.start_server): with the person's token the
page is 200 HTML that says the version, the runs folder relative to the root, the run counts and
whether shell tools are offered; without a token it is refused (403); the page holds no token, no
provider key and no path of the machine's; the REST routes beside it answer as before.
"""

from __future__ import annotations

import httpx
import pytest
from server_process import start_server

from kernel_ext.server.handlers.status import runs_dir_shown
from kernel_ext.version import __version__

KEY = "sk-status-page-secret-0123456789abcdef"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("status")
    env = {"OPENAI_API_KEY": KEY, "BESSER_LLM_PROVIDER": "openai", "BESSER_LLM_ENABLE_SHELL_TOOLS": "0"}
    process = start_server(workdir, env=env)
    try:
        yield process
    finally:
        process.stop()


@pytest.mark.parametrize("path", ["besser-agent/", "besser-agent"])
def test_the_page_answers_a_person_with_the_token(server, path):
    answer = httpx.get(f"{server.url}/{path}", headers={"Authorization": f"token {server.token}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    page = answer.text
    assert "besser-agent is running on this Jupyter server" in page
    assert __version__ in page
    assert "<td>besser_runs</td>" in page  # relative to the root, as the file browser names it
    assert "0 runs running, 0 queued" in page
    assert "shell tools</th><td>disabled" in page
    for secret in (server.token, KEY, str(server.root_dir), str(server.tmpdir), "/home", "/root"):
        assert secret not in page, secret


def test_the_page_with_a_login_cookie_as_a_browser_has_it(server):
    """A click from JupyterLab carries the login cookie, not a header: the page answers that too."""
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        assert browser.get(f"/login?token={server.token}", follow_redirects=True).status_code == 200
        answer = browser.get("/besser-agent/")
    assert answer.status_code == 200 and "besser-agent is running" in answer.text


@pytest.mark.parametrize("headers", [{}, {"Authorization": "token wrong"}])
def test_the_page_is_refused_without_the_token(server, headers):
    answer = httpx.get(f"{server.url}/besser-agent/", headers=headers, timeout=30)
    assert answer.status_code == 403
    assert "besser-agent is running" not in answer.text and "besser_runs" not in answer.text


def test_the_rest_routes_beside_it_are_unchanged(server):
    headers = {"Authorization": f"token {server.token}"}
    assert httpx.get(f"{server.url}/besser-agent/config", headers=headers, timeout=30).json()["version"] == __version__
    assert httpx.get(f"{server.url}/besser-agent/runs", headers=headers, timeout=30).status_code == 200
    unknown = httpx.get(f"{server.url}/besser-agent/nothing-here", headers=headers, timeout=30)
    assert unknown.status_code == 404 and unknown.json()["code"] == "NOT_FOUND"


def test_a_runs_folder_outside_the_root_is_not_named(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    assert runs_dir_shown(str(root / "besser_runs"), str(root)) == "besser_runs"
    assert runs_dir_shown(str(root), str(root)) == "the root folder itself"
    assert runs_dir_shown(str(tmp_path / "elsewhere" / "runs"), str(root)) == "outside the server's root folder"
    assert runs_dir_shown("/var/tmp/runs", str(root)) == "outside the server's root folder"
