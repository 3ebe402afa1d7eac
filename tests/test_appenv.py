"""The generated app's own environment (``kernel_ext.appenv``): its requirements met, the server's untouched.

Wheels are real (written by ``wheel_factory``) and installed by pip inside the real sandbox from
a wheelhouse folder, offline; the app is a real FastAPI app run by a real app host through
``test_api`` and ``validate_app``. The server's packages are listed before and after each build.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
from api_fixtures import call, executor_for, requires_sandbox
from wheel_factory import make_wheel

from kernel_ext.appenv.environment import environment_for
from kernel_ext.appenv.overlay import overlay_key
from kernel_ext.appenv.plan import plan_for
from kernel_ext.appenv.requirements import read_requirements
from kernel_ext.appenv.settings import AppEnvSettings
from kernel_ext.errors import ToolFailure
from kernel_ext.tools.base import RunState
from kernel_ext.validation.apphost.host import AppHost
from kernel_ext.validation.validate import validate_app

APP = '''from fastapi import FastAPI
import besser_demo_dep
import yaml

app = FastAPI()


@app.get("/versions")
def versions():
    return {"dep": besser_demo_dep.__version__, "yaml": yaml.__version__}
'''


def server_packages() -> dict[str, str]:
    return {d.metadata["Name"].lower(): d.version for d in importlib.metadata.distributions()}


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def wheelhouse(tmp_path, monkeypatch):
    house = tmp_path / "wheelhouse"
    make_wheel(house, "besser-demo-dep", "1.2.0")
    make_wheel(house, "PyYAML", "0.1", module="yaml")  # older than the server's: must not replace it
    monkeypatch.setenv("BESSER_APP_WHEELHOUSE", str(house))
    monkeypatch.setenv("BESSER_APP_ENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BESSER_APP_ENV_NETWORK", raising=False)
    return house


@pytest.fixture
def no_sources(tmp_path, monkeypatch):
    monkeypatch.delenv("BESSER_APP_WHEELHOUSE", raising=False)
    monkeypatch.delenv("BESSER_APP_ENV_NETWORK", raising=False)
    monkeypatch.setenv("BESSER_APP_ENV_CACHE", str(tmp_path / "cache"))


def app_project(root: Path, requirements: str, main: str = APP) -> Path:
    backend = root / "backend"
    backend.mkdir(parents=True)
    (backend / "main_api.py").write_text(main)
    (backend / "requirements.txt").write_text(requirements)
    return root


# -- reading and planning -------------------------------------------------------------------------


def test_lines_that_would_choose_where_packages_come_from_are_named_and_ignored():
    listed = read_requirements(
        "fastapi>=0.100  # the web framework\n--index-url https://evil.example/simple\n-r other.txt\n-e ./local\n"
        "https://evil.example/pkg.whl\nsomething @ https://evil.example/x.whl\nnot a requirement!!\n"
        "pywin32; sys_platform == 'win32'\nFastAPI<1\n\n# a comment\n"
    )
    assert [str(r) for r in listed.requirements] == ["fastapi<1,>=0.100"]  # two lines for one package: both hold
    reasons = dict(listed.unusable)
    assert set(reasons) == {"--index-url https://evil.example/simple", "-r other.txt", "-e ./local",
                            "https://evil.example/pkg.whl", "something @ https://evil.example/x.whl", "not a requirement!!"}
    assert "operator" in reasons["--index-url https://evil.example/simple"]
    assert "operator" in reasons["something @ https://evil.example/x.whl"]


def test_an_oversized_requirements_file_is_not_read():
    listed = read_requirements(b"a\n" * 40_000)
    assert listed.requirements == () and "not read" in listed.unusable[0][1]


def test_the_plan_uses_what_the_server_has_and_names_what_it_lacks():
    fastapi = importlib.metadata.version("fastapi")
    listed = read_requirements(f"fastapi=={fastapi}\nfastapi-nope-besser>=1\npydantic<1\n")
    plan = plan_for(listed.requirements)
    assert [(p.name, p.version, p.where) for p in plan.provided] == [("fastapi", fastapi, "server")]
    assert [r.name for r in plan.missing] == ["fastapi-nope-besser", "pydantic"]
    assert [(r.name, v) for r, v in plan.wrong_version] == [("pydantic", importlib.metadata.version("pydantic"))]


def test_the_cache_key_follows_the_requirements_set_not_its_order():
    a = read_requirements("b>=1\na==2\n").requirements
    b = read_requirements("a==2\nb>=1\n").requirements
    c = read_requirements("a==3\nb>=1\n").requirements
    assert overlay_key(a) == overlay_key(b) != overlay_key(c)


# -- what cannot be provided ------------------------------------------------------------------------


def test_without_a_source_a_missing_package_is_one_named_refusal(no_sources, tmp_path):
    with pytest.raises(ToolFailure) as caught:
        environment_for("besser-no-such-package==9\nfastapi\n")
    assert caught.value.code == "requirements_unmet"
    message = caught.value.message
    assert "besser-no-such-package==9 (not installed)" in message and "fastapi" not in message.split("needs")[1].split("which")[0]
    assert "BESSER_APP_WHEELHOUSE" in message and "BESSER_APP_ENV_NETWORK" in message
    assert not (tmp_path / "cache").exists()  # nothing was built, nothing written


@requires_sandbox
def test_a_package_the_wheelhouse_lacks_is_named_after_the_build_and_nothing_is_cached(wheelhouse, tmp_path):
    with pytest.raises(ToolFailure) as caught:
        environment_for("besser-demo-dep==1.2.0\nbesser-absent-pkg>=3\n")
    assert caught.value.code == "requirements_unmet"
    assert caught.value.data["not_found"] == ["besser-absent-pkg"]
    assert "besser-absent-pkg>=3 (not installed)" in caught.value.message
    assert "besser-demo-dep" not in caught.value.message.split("needs")[1].split(", which")[0]  # found: not named
    cache = tmp_path / "cache"
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == []  # no half-built overlay kept
    assert not [p for p in cache.iterdir() if p.name.startswith(".build-")]


@requires_sandbox
def test_validate_app_reports_unmet_requirements_as_one_finding_without_a_traceback(no_sources, tmp_path):
    root = app_project(tmp_path / "project", "fastapi\nbesser-no-such-package==9\n")
    before = tree(root)
    host = AppHost()
    try:
        result = validate_app(root, host=host)
    finally:
        host.close()
    unmet = [f for f in result.report.findings if f.code == "requirements_unmet"]
    assert len(unmet) == 1 and unmet[0].severity == "blocker" and unmet[0].path == "backend/requirements.txt"
    assert "besser-no-such-package==9" in unmet[0].message
    text = result.to_text() + json.dumps(result.to_data())
    assert "Traceback" not in text and "ModuleNotFoundError" not in text
    assert host.submitted == 0  # the app was never started
    assert tree(root) == before


@requires_sandbox
def test_an_import_no_requirement_provides_is_named_as_a_missing_package(no_sources, tmp_path):
    main = "from fastapi import FastAPI\nimport besser_unlisted_module.sub\n\napp = FastAPI()\n"
    root = app_project(tmp_path / "project", "fastapi\n", main)
    host = AppHost()
    try:
        result = validate_app(root, host=host)
    finally:
        host.close()
    (missing,) = [f for f in result.report.findings if f.code == "module_missing"]
    assert "'besser_unlisted_module'" in missing.message and "requirements.txt" in missing.message
    assert missing.path == "backend/main_api.py" and missing.line == 2
    assert "ModuleNotFoundError" not in result.to_text()


# -- an overlay built, used and reused --------------------------------------------------------------


@requires_sandbox
def test_an_overlay_is_built_in_the_sandbox_used_by_the_app_and_reused(wheelhouse, tmp_path):
    server_before = server_packages()
    root = app_project(tmp_path / "project", "fastapi\nbesser-demo-dep==1.2.0\nPyYAML==0.1\n")
    host = AppHost()
    try:
        executor = executor_for(root, host, state=RunState(run_id="appenv"))
        result = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/versions", "expected_status": 200,
                                                            "expected_fields": {"dep": "1.2.0", "yaml": "0.1"}}]})
        assert result.ok, result.observation
        environment = host.environment
        assert environment is not None and environment.built_s is not None and environment.key
        packages = {(p.name, p.version, p.where) for p in environment.packages}
        assert {("besser-demo-dep", "1.2.0", "app env"), ("pyyaml", "0.1", "app env")} <= packages
        assert ("fastapi", importlib.metadata.version("fastapi"), "server") in packages
        line = environment.line()
        assert "pyyaml 0.1" in line and "built in" in line and "Python" in line
        overlay = tmp_path / "cache" / environment.key
        assert json.loads((overlay / "env.json").read_text())["packages"] == [["besser-demo-dep", "1.2.0"], ["pyyaml", "0.1"]]
        built = tree(overlay)
        # A second run (another host, the same requirements in another order) reuses the overlay.
        other = app_project(tmp_path / "other", "PyYAML==0.1\nbesser-demo-dep==1.2.0\nfastapi\n")
        second = AppHost()
        try:
            again = call(executor_for(other, second, state=RunState(run_id="appenv-2")), "test_api",
                         {"requests": [{"method": "GET", "path": "/versions", "expected_status": 200,
                                        "expected_fields": {"yaml": "0.1"}}]})
            assert again.ok, again.observation
            assert second.environment.key == environment.key and second.environment.built_s is None
            assert "cached" in second.environment.line()
        finally:
            second.close()
        assert tree(overlay) == built
    finally:
        host.close()
    assert server_packages() == server_before  # the server's yaml (and everything else) is as it was
    import yaml

    assert yaml.__version__ != "0.1"


@requires_sandbox
def test_a_changed_requirements_file_restarts_the_host_with_the_new_overlay(wheelhouse, tmp_path):
    root = app_project(tmp_path / "project", "fastapi\n", "from fastapi import FastAPI\n\napp = FastAPI()\n\n"
                       "@app.get('/v')\ndef v():\n    import yaml\n    return {'yaml': yaml.__version__}\n")
    host = AppHost()
    try:
        executor = executor_for(root, host, state=RunState(run_id="appenv-3"))
        first = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/v", "expected_status": 200}]})
        assert first.ok, first.observation
        server_yaml = first.data["report"]["requests"][0]["response"]["body"]["yaml"]
        assert server_yaml == importlib.metadata.version("pyyaml")  # no overlay yet: the server's copy
        starts = host.starts
        (root / "backend" / "requirements.txt").write_text("fastapi\nPyYAML==0.1\n")
        second = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/v", "expected_status": 200,
                                                            "expected_fields": {"yaml": "0.1"}}]})
        assert second.ok, second.observation
        assert host.starts == starts + 1 and host.environment.key  # restarted once, with the overlay first
    finally:
        host.close()


def test_settings_come_from_the_operator_environment(tmp_path):
    settings = AppEnvSettings.from_environment({"BESSER_APP_WHEELHOUSE": str(tmp_path), "BESSER_APP_ENV_NETWORK": "1",
                                                "BESSER_APP_ENV_BUILD_SECONDS": "-5", "XDG_CACHE_HOME": str(tmp_path / "c")})
    assert settings.wheelhouse == tmp_path and settings.network and settings.can_fetch
    assert settings.build_seconds == 600.0  # a nonsense value keeps the default
    assert settings.cache == tmp_path / "c" / "besser-agent" / "app-envs"
    assert not AppEnvSettings.from_environment({}).can_fetch


@requires_sandbox
def test_a_run_whose_model_adds_an_unavailable_requirement_ends_with_one_named_finding(no_sources, tmp_path):
    from pipeline_helpers import Turn, events_of, run_pipeline
    from pipeline_helpers import call as scripted_call

    turns = [
        Turn("", (scripted_call("submit_tasks", {"tasks": ["add a dependency"]}),)),
        Turn("", (scripted_call("read_file", {"path": "backend/requirements.txt"}),)),
        Turn("", (scripted_call("write_file", {"path": "backend/requirements.txt",
                                               "content": "fastapi\nsqlalchemy\nbesser-no-such-package-zz==1.0\n"}),)),
        Turn("done"),
    ] + [Turn("cannot fix")] * 12
    run, done = run_pipeline(tmp_path, "Generate a FastAPI backend", turns)
    assert done.status == "blocked"
    naming = {f.message for f in events_of(run, "finding") if "besser-no-such-package-zz" in f.message}
    assert len(naming) == 1, naming  # one finding (repeated per validation sweep), not an import chain
    (message,) = naming
    assert "besser-no-such-package-zz==1.0 (not installed)" in message and "BESSER_APP_WHEELHOUSE" in message
    assert any("besser-no-such-package-zz" in b for b in done.blockers)
    log = (run.context.layout.run_dir / "events.jsonl").read_text()
    assert "Traceback" not in log and "ModuleNotFoundError" not in log


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
            def do_GET(self):  # noqa: N802 - the http.server name
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
    try:
        result = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/docs", "expected_status": 200}]})
        assert not result.ok and result.error.code == "requirements_unmet"
        assert "leakpkg==1.0 (not installed)" in result.error.message and "fifopkg (not installed)" in result.error.message
        assert host.submitted == 0 and host.process is None  # the app was never started with anything mounted
    finally:
        host.close()
        h.service.close()


def test_extras_count_only_when_their_packages_are_installed():
    import importlib.util

    plan = plan_for(read_requirements("uvicorn\npydantic[besser-no-such-extra]\n").requirements)
    assert [p.name for p in plan.provided] == ["uvicorn", "pydantic"]  # an unknown extra adds nothing
    if importlib.util.find_spec("email_validator") is None:
        plan = plan_for(read_requirements("pydantic[email]\n").requirements)
        assert [r.name for r in plan.missing] == ["pydantic"]  # pydantic is here, email-validator is not


def test_variables_and_file_names_are_not_requirements():
    listed = read_requirements("zz===${PATH}\nx.whl\nrequirements.tar.gz\nfastapi\n")
    assert [r.name for r in listed.requirements] == ["fastapi"]
    reasons = dict(listed.unusable)
    assert "environment variable" in reasons["zz===${PATH}"]
    assert "file name" in reasons["x.whl"] and "file name" in reasons["requirements.tar.gz"]


@requires_sandbox
@pytest.mark.parametrize("damage", ["no manifest", "a file", "no site", "a link"])
def test_a_damaged_cache_entry_is_rebuilt_not_fatal(wheelhouse, tmp_path, damage):
    requirements = "besser-demo-dep==1.2.0\n"
    key = overlay_key(read_requirements(requirements).requirements)
    cache = tmp_path / "cache"
    entry = cache / key
    cache.mkdir()
    if damage == "no manifest":
        (entry / "site").mkdir(parents=True)
    elif damage == "a file":
        entry.write_text("not a folder")
    elif damage == "no site":
        entry.mkdir()
        (entry / "env.json").write_text('{"packages": [["besser-demo-dep", "1.2.0"]]}')
    else:
        elsewhere = tmp_path / "elsewhere"
        (elsewhere / "site").mkdir(parents=True)
        (elsewhere / "env.json").write_text('{"packages": [["besser-demo-dep", "1.2.0"]]}')
        entry.symlink_to(elsewhere)
    environment = environment_for(requirements)
    assert environment.built_s is not None and environment.overlay == entry / "site"
    assert not entry.is_symlink() and (entry / "site" / "besser_demo_dep" / "__init__.py").is_file()
    if damage == "a link":
        assert not (tmp_path / "elsewhere" / "site" / "besser_demo_dep").exists()  # nothing written through the link


def test_the_configuration_says_where_an_apps_packages_may_come_from(tmp_path, monkeypatch):
    from kernel_ext.hosting.options import OperatorSettings
    from kernel_ext.server.report import describe_configuration

    monkeypatch.delenv("BESSER_APP_ENV_NETWORK", raising=False)
    monkeypatch.delenv("BESSER_APP_WHEELHOUSE", raising=False)
    closed = describe_configuration(OperatorSettings())["app_environment"]
    assert closed["fetches"] is False and closed["sources"].startswith("none")
    monkeypatch.setenv("BESSER_APP_WHEELHOUSE", str(tmp_path))
    monkeypatch.setenv("BESSER_APP_ENV_NETWORK", "1")
    opened = describe_configuration(OperatorSettings())["app_environment"]
    assert opened["fetches"] is True and str(tmp_path) in opened["sources"] and "package index" in opened["sources"]
