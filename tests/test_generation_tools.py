"""``generate_*`` tools through the real Executor: approval, fence, ledger, races, options."""

from __future__ import annotations

import pytest
from model_fixtures import call, executor_for, minimal_gui_model, tree

from kernel_ext.boundary import ScriptedApprover, always_deny
from kernel_ext.generation.manifest import LEDGER_KEY
from kernel_ext.model import build_library_model
from kernel_ext.workspace import Workspace


@pytest.fixture
def app(tmp_path):
    root = tmp_path / "app"
    root.mkdir()
    (root / "README.md").write_text("mine\n")
    return root


def services(root):
    return {"workspace": Workspace(root), "domain_model": build_library_model()}


def test_denied_generation_writes_nothing(app):
    before = tree(app)
    executor = executor_for(services(app), approver=always_deny)
    result = call(executor, "generate_fastapi_backend", {"http_methods": ["GET", "POST"]})
    assert not result.ok and result.error.code == "approval_denied"
    assert tree(app) == before
    assert not executor.context.state.stores.get(LEDGER_KEY)


def test_policy_without_generate_refuses_before_running(app):
    before = tree(app)
    result = call(executor_for(services(app), allow=()), "generate_sqlalchemy", {})
    assert result.error.code == "policy_denied" and tree(app) == before


def test_approved_generation_publishes_and_records_the_ledger(app):
    requests = []

    def approver(request):
        requests.append(request)
        return True

    executor = executor_for(services(app), approver=approver)
    result = call(executor, "generate_fastapi_backend", {})
    assert result.ok, result.observation
    assert "FastAPI backend: 14 new and 0 changed files under backend/" in result.observation
    assert (app / "backend" / "main_api.py").is_file() and (app / "README.md").read_text() == "mine\n"
    (request,) = requests
    assert "14 new" in request.proposal and request.files == ()
    ledger = executor.context.state.stores[LEDGER_KEY]
    assert set(ledger.files) == set(result.data["created"]) and ledger.runs[0]["generator"] == "fastapi_backend"
    assert result.data["findings"] == []


def test_regeneration_lists_and_overwrites_changed_files(app):
    executor = executor_for(services(app), approver=ScriptedApprover([True, True]))
    assert call(executor, "generate_sqlalchemy", {}).ok
    target = app / "sqlalchemy" / "sql_alchemy.py"
    target.write_text("# edited by hand\n")
    seen = []
    executor.approver = lambda request: seen.append(request) or True
    result = call(executor, "generate_sqlalchemy", {"dbms": "mysql"})
    assert result.ok and result.data["overwritten"] == ["sqlalchemy/sql_alchemy.py"]
    assert "overwritten if their content differs: sqlalchemy/sql_alchemy.py" in seen[0].proposal
    assert [s.path for s in seen[0].files] == ["sqlalchemy/sql_alchemy.py"]
    assert b"mysql" in target.read_bytes()


def test_a_file_appearing_after_preparation_stops_the_write(app):
    def observer(event):
        if event.kind == "dispatch":
            (app / "backend").mkdir(exist_ok=True)
            (app / "backend" / "main_api.py").write_text("# someone else\n")

    executor = executor_for(services(app), observer=observer)
    result = call(executor, "generate_fastapi_backend", {})
    assert not result.ok and result.error.code == "stale_input" and "after the call was prepared" in result.error.message
    assert sorted(tree(app)) == ["README.md", "backend/main_api.py"]
    assert (app / "backend" / "main_api.py").read_text() == "# someone else\n"


def test_an_overwritten_file_changed_during_approval_is_stale(app):
    executor = executor_for(services(app))
    assert call(executor, "generate_pydantic", {}).ok
    target = app / "pydantic" / "pydantic_classes.py"

    def approver(request):
        target.write_text("# changed while the card was open\n")
        return True

    target.write_text("# local edit\n")
    executor.approver = approver
    result = call(executor, "generate_pydantic", {"backend": True})
    assert result.error.code == "stale_input"
    assert target.read_text() == "# changed while the card was open\n"


def test_bad_options_are_refused_before_approval(app):
    asked = []
    executor = executor_for(services(app), approver=lambda r: asked.append(r) or True)
    result = call(executor, "generate_sqlalchemy", {"dbms": "db2"})
    assert result.error.code == "invalid_argument" and not asked
    result = call(executor, "generate_fastapi_backend", {"http_methods": ["FETCH"]})
    assert result.error.code == "invalid_argument"
    assert call(executor, "generate_rdf", {"extra": 1}).error.code == "invalid_argument"
    assert sorted(tree(app)) == ["README.md"]


def test_generator_tools_refuse_a_symlinked_folder(app, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (app / "json_schema").symlink_to(outside)
    result = call(executor_for(services(app)), "generate_json_schema", {})
    assert not result.ok and result.error.code == "symlink_refused"
    assert list(outside.iterdir()) == []


def test_react_tool_needs_and_uses_a_gui_model(app):
    plain = executor_for(services(app))
    assert call(plain, "generate_react", {}).error.code == "tool_not_offered"
    executor = executor_for({**services(app), "gui_model": minimal_gui_model()})
    result = call(executor, "generate_react", {})
    assert result.ok, result.observation
    assert (app / "frontend" / "package.json").is_file() and (app / "frontend" / "src" / "App.tsx").is_file()
