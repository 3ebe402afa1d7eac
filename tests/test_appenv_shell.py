# ruff: noqa: F811 - the fixtures imported from appenv_fixtures are requested by name
"""The app's environment with shell tools on: the refusal names install_dependencies, an approved
install builds the overlay from a real PEP 503 index over HTTP, and nothing the run's shell plants
(a link to a host folder, a FIFO as package metadata) is ever mounted into the app or read by the server."""

from __future__ import annotations

from pathlib import Path

from api_fixtures import call, requires_sandbox
from appenv_fixtures import APP, app_project, no_sources, tree  # noqa: F401 - fixtures by name
from wheel_factory import make_wheel

from kernel_ext.tools.base import RunState
from kernel_ext.validation.apphost.host import AppHost


class LocalIndex:
    """A real PEP 503 simple index over HTTP on the loopback, serving a folder of wheels."""

    def __init__(self, house: Path):
        import functools
        import hashlib
        import http.server
        import threading

        pages: dict[str, bytes] = {}
        for wheel in house.glob("*.whl"):
            project = wheel.name.split("-")[0].replace("_", "-").lower()
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            pages.setdefault(f"/simple/{project}/", b"")
            pages[f"/simple/{project}/"] += f'<a href="/files/{wheel.name}#sha256={digest}">{wheel.name}</a>\n'.encode()
        self.requests: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests.append(self.path)
                if self.path in pages:
                    body, kind = b"<html><body>" + pages[self.path] + b"</body></html>", "text/html"
                elif self.path.startswith("/files/") and (house / self.path[7:]).is_file():
                    body, kind = (house / self.path[7:]).read_bytes(), "application/octet-stream"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@requires_sandbox
def test_with_shell_tools_install_dependencies_builds_the_apps_environment(no_sources, tmp_path, monkeypatch):
    """The refusal names install_dependencies; the approved install builds the overlay from the index
    (the run's shell has the network), and the app then imports the package."""
    from shell_tools_fixtures import harness

    from kernel_ext.boundary import ApprovalPolicy, ExecutionPolicy, Executor
    from kernel_ext.tools.base import ToolContext
    from kernel_ext.tools.registry import default_catalog
    from kernel_ext.workspace import Workspace

    make_wheel(tmp_path / "served", "besser-demo-dep", "1.2.0")
    index = LocalIndex(tmp_path / "served")
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    h = harness(tmp_path)
    project = h.ws
    app_project(project, "fastapi\nbesser-demo-dep==1.2.0\n", APP.replace("import yaml\n", "").replace(
        ', "yaml": yaml.__version__', ""))
    host = AppHost()
    approved: list[str] = []
    executor = Executor(
        default_catalog(),
        ToolContext(services={"workspace": Workspace(project), "shell": h.service, "app_host": host},
                    state=RunState(run_id="appenv-shell")),
        policy=ExecutionPolicy.allowing(["shell", "test"]),
        approvals=ApprovalPolicy.without_approval_for("test"),
        approver=lambda request: approved.append(request.name) or True,
    )
    probe = {"requests": [{"method": "GET", "path": "/versions", "expected_status": 200, "expected_fields": {"dep": "1.2.0"}}]}
    try:
        refused = call(executor, "test_api", probe)
        assert not refused.ok and refused.error.code == "requirements_unmet"
        assert "install_dependencies" in refused.error.message and "besser-demo-dep==1.2.0" in refused.error.message
        assert index.requests == []  # no source was allowed: nothing was fetched
        installed = call(executor, "install_dependencies", {"working_dir": "backend", "command": "python -m pip --version"})
        assert installed.ok, installed.observation
        assert approved == ["install_dependencies"]  # the install asked; test_api did not need to
        assert "besser-demo-dep 1.2.0" in installed.observation and installed.data["app_environment"]["overlay"]
        assert any(r.startswith("/files/besser_demo_dep-1.2.0") for r in index.requests)
        passed = call(executor, "test_api", probe)
        assert passed.ok, passed.observation
        assert ("besser-demo-dep", "1.2.0", "app env") in {(p.name, p.version, p.where) for p in host.environment.packages}
    finally:
        index.close()
        host.close()
        h.service.close()


@requires_sandbox
def test_nothing_the_runs_shell_plants_is_mounted_or_read_by_the_server(no_sources, tmp_path):
    """A shell home site-packages that links to a host folder holding a package, or holds metadata that
    is a FIFO: the app host neither sees the host folder nor blocks on the FIFO."""
    import os

    from shell_tools_fixtures import harness

    from kernel_ext.boundary import ApprovalPolicy, ExecutionPolicy, Executor
    from kernel_ext.tools.base import ToolContext
    from kernel_ext.tools.registry import default_catalog
    from kernel_ext.workspace import Workspace

    secret_site = tmp_path / "host-folder"
    (secret_site / "leakpkg-1.0.dist-info").mkdir(parents=True)
    (secret_site / "leakpkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: leakpkg\nVersion: 1.0\n")
    (secret_site / "leakpkg").mkdir()
    (secret_site / "leakpkg" / "__init__.py").write_text("")
    h = harness(tmp_path)
    site = h.home / ".local" / "lib" / "python3.11" / "site-packages"
    site.parent.mkdir(parents=True)
    site.symlink_to(secret_site)
    fifo_site = h.home / ".local" / "lib" / "python3.12" / "site-packages" / "fifopkg-1.0.dist-info"
    fifo_site.mkdir(parents=True)
    os.mkfifo(fifo_site / "METADATA")
    app_project(h.ws, "fastapi\nleakpkg==1.0\nfifopkg\n", "from fastapi import FastAPI\nimport leakpkg\n\napp = FastAPI()\n")
    host = AppHost()
    executor = Executor(
        default_catalog(),
        ToolContext(services={"workspace": Workspace(h.ws), "shell": h.service, "app_host": host},
                    state=RunState(run_id="appenv-plant")),
        policy=ExecutionPolicy.allowing(["test"]), approvals=ApprovalPolicy.without_approval_for("test"),
        approver=lambda request: True,
    )
    before, host_before = tree(h.ws), tree(secret_site)
    try:
        result = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/docs", "expected_status": 200}]})
        assert not result.ok and result.error.code == "requirements_unmet"
        assert "leakpkg==1.0 (not installed)" in result.error.message and "fifopkg (not installed)" in result.error.message
        assert host.submitted == 0 and host.process is None  # the app was never started with anything mounted
        assert tree(h.ws) == before and tree(secret_site) == host_before
    finally:
        host.close()
        h.service.close()
