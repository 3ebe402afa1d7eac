# ruff: noqa: F811 - the fixtures imported from appenv_fixtures are requested by name
"""The generated app's own environment (``kernel_ext.appenv``): its requirements met, the server's untouched.

Wheels are real (written by ``wheel_factory``) and installed by pip inside the real sandbox from
a wheelhouse folder, offline; the app is a real FastAPI app run by a real app host through
``test_api`` and ``validate_app``. The server's packages are listed before and after each build.
"""

from __future__ import annotations

import importlib.metadata
import json

import pytest
from api_fixtures import call, executor_for, requires_sandbox
from appenv_fixtures import APP, app_project, no_sources, server_packages, tree, wheelhouse  # noqa: F401 - fixtures by name

from kernel_ext.appenv.environment import environment_for
from kernel_ext.appenv.overlay import overlay_key
from kernel_ext.appenv.requirements import read_requirements
from kernel_ext.errors import ToolFailure
from kernel_ext.tools.base import RunState
from kernel_ext.validation.apphost.host import AppHost
from kernel_ext.validation.validate import validate_app


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


@requires_sandbox
@pytest.mark.parametrize("damage", ["no manifest", "a file", "no site", "a link"])
def test_a_damaged_cache_entry_is_rebuilt_not_fatal(wheelhouse, tmp_path, damage):
    requirements = "besser-demo-dep==1.2.0\n"
    key = overlay_key(read_requirements(requirements).requirements)
    cache = tmp_path / "cache"
    entry = cache / key
    cache.mkdir(mode=0o700)  # the server's private folder, as it makes one (the damage is inside it)
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
