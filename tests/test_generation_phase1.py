"""Phase 1 with real BESSER generators: output, checks, offers, stack files, authorship."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from model_fixtures import cli, executor_for, minimal_gui_model, tree

from kernel_ext.errors import ToolFailure
from kernel_ext.generation import (
    GenerationLedger,
    authorship_split,
    check_files,
    detect_stack,
    get_target,
    phase1_choices,
    resolve_target,
    run_phase1,
    tree_hashes,
)
from kernel_ext.generation.manifest import sha256_bytes
from kernel_ext.model import build_library_model
from kernel_ext.workspace import Workspace


@pytest.fixture(scope="module")
def library_app(tmp_path_factory):
    out = tmp_path_factory.mktemp("app")
    ledger = GenerationLedger()
    result = run_phase1(build_library_model(), out, "fastapi_backend", ledger=ledger)
    return out, result, ledger


def test_fastapi_backend_lands_in_the_workspace_untouched(library_app, tmp_path):
    out, result, _ = library_app
    assert result.ok and result.findings == [] and result.checks.app_import == "ok"
    paths = {f.path for f in result.files}
    assert {"backend/main_api.py", "backend/sql_alchemy.py", "backend/pydantic_classes.py", "backend/requirements.txt",
            "backend/routers/book.py", "backend/routers/book_methods.py"} <= paths
    on_disk = {p: sha256_bytes(b) for p, b in tree(out).items()}
    assert on_disk == {f.path: f.sha256 for f in result.files}
    # Byte-for-byte what BESSER writes when called directly: Phase 1 never rewrites it.
    from besser.generators.backend import BackendGenerator

    BackendGenerator(model=build_library_model(), http_methods=["GET", "POST", "PUT", "DELETE"], output_dir=str(tmp_path)).generate()
    assert {f"backend/{p}": b for p, b in tree(tmp_path).items()} == tree(out)
    assert result.to_dict()["model"]["digest"] and result.besser_version.startswith("8.")


def test_generated_app_imports_creates_and_lists_in_process(library_app, tmp_path):
    out, _, _ = library_app
    script = textwrap.dedent(
        """
        import json, main_api
        from fastapi.testclient import TestClient
        with TestClient(main_api.app) as client:
            created = client.post("/author/", json={"name": "Ada", "email": "ada@example.org", "nationality": "UK"})
            listed = client.get("/author/")
            bad = client.post("/book/", json={"isbn": "1", "title": "T", "pages": -5, "genre": "FICTION",
                                                "authors": [1], "library": 1})
        print(json.dumps({"created": created.status_code, "body": created.json(), "listed": listed.json(),
                          "bad": bad.status_code}))
        """
    )
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'test.db'}", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=out / "backend", env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["created"] == 200 and report["body"]["author"]["name"] == "Ada"
    assert [a["name"] for a in report["listed"]] == ["Ada"]
    assert report["bad"] == 422  # the OCL rule pages > 0 became a validator


def test_offers_follow_the_models_present(tmp_path):
    assert "fastapi_backend" in phase1_choices({"domain"})
    assert "react" not in phase1_choices({"domain"}) and "web_app" not in phase1_choices({"domain"})
    assert {"react", "web_app"} <= set(phase1_choices({"domain", "gui"}))
    assert phase1_choices(set()) == []
    ws = Workspace(tmp_path)
    plain = executor_for({"workspace": ws, "domain_model": build_library_model()}).offered
    assert "generate_fastapi_backend" in plain and "generate_react" not in plain and "query_class" in plain
    with_gui = executor_for({"workspace": ws, "domain_model": build_library_model(), "gui_model": object()}).offered
    assert "generate_react" in with_gui and "generate_web_app" in with_gui
    no_model = executor_for({"workspace": ws}).offered
    assert not [n for n in no_model.names() if n.startswith("generate_") or n == "query_class"]


def test_explicit_target_is_honoured_or_refused_by_name(tmp_path):
    assert resolve_target("sqlalchemy", {"domain"}).name == "sqlalchemy"
    assert get_target("generate_fastapi_backend").name == "fastapi_backend"
    with pytest.raises(ToolFailure) as info:
        resolve_target("react", {"domain"})
    assert info.value.code == "generator_unavailable" and "gui" in info.value.message
    with pytest.raises(ToolFailure) as info:
        run_phase1(build_library_model(), tmp_path / "out", "react")
    assert info.value.code == "generator_unavailable" and not (tmp_path / "out").exists()
    with pytest.raises(ToolFailure) as info:
        get_target("cobol")
    assert info.value.code == "invalid_argument" and "fastapi_backend" in info.value.message


def test_options_use_besser_names_and_are_validated(tmp_path):
    result = run_phase1(build_library_model(), tmp_path, "sqlalchemy", {"dbms": "postgresql"})
    assert result.options == {"dbms": "postgresql"}
    assert b"postgresql+psycopg2" in (tmp_path / "sqlalchemy" / "sql_alchemy.py").read_bytes()
    with pytest.raises(ToolFailure) as info:
        run_phase1(build_library_model(), tmp_path / "x", "sqlalchemy", {"dbms": "db2"})
    assert info.value.code == "invalid_argument" and "dbms" in info.value.message
    with pytest.raises(ToolFailure) as info:
        run_phase1(build_library_model(), tmp_path / "x", "fastapi_backend", {"httpMethods": ["GET"]})
    assert info.value.code == "invalid_argument"


@pytest.mark.parametrize(
    "name, expected",
    [("pydantic", {"pydantic/pydantic_classes.py"}), ("sql", {"sql/tables_sqlite.sql"}),
     ("json_schema", {"json_schema/json_schema.json"}), ("python_classes", {"python/classes.py"}),
     ("rdf", {"rdf/vocabulary.ttl"}), ("rest_api", {"rest_api/rest_api.py", "rest_api/pydantic_classes.py", "rest_api/requirements.txt"})],
)
def test_other_besser_generators_run(tmp_path, name, expected):
    result = run_phase1(build_library_model(), tmp_path, name, import_app=False)
    assert expected <= {f.path for f in result.files}
    assert not result.checks.blockers


def test_web_app_with_a_gui_model_boots(tmp_path):
    result = run_phase1(build_library_model(), tmp_path, "web_app", gui_model=minimal_gui_model())
    paths = {f.path for f in result.files}
    assert {"web_app/backend/main_api.py", "web_app/frontend/package.json"} <= paths
    assert result.ok and result.checks.app_import == "ok" and result.findings == []


def test_stack_metadata_writes_only_build_files(tmp_path):
    assert detect_stack("a Next.js dashboard") == "nextjs"
    assert detect_stack("an API in Rust with axum") == "rust"
    assert detect_stack("Kotlin + Spring Boot service") == "kotlin_spring"
    assert detect_stack("FastAPI backend with JWT") is None
    result = run_phase1(build_library_model(), tmp_path, "nextjs")
    assert sorted(tree(tmp_path)) == ["next-env.d.ts", "next.config.mjs", "package.json", "tsconfig.json"]
    assert json.loads((tmp_path / "package.json").read_text())["name"] == "library"
    assert result.kind == "metadata" and result.checks.app_import.startswith("skipped")
    run_phase1(build_library_model(), tmp_path / "rs", "rust")
    assert 'name = "library"' in (tmp_path / "rs" / "Cargo.toml").read_text()


def test_a_python_keyword_as_a_name_is_refused_before_besser_runs(tmp_path):
    # BESSER pastes names into pydantic_classes.py: 'from' used to come out as a syntax error
    # there; now the name is refused by name (model/names.py) and nothing is written.
    from besser.BUML.metamodel.structural import Class, DomainModel, Property, StringType

    trip = Class(name="Trip", attributes={Property(name="from", type=StringType), Property(name="to", type=StringType)})
    out = tmp_path / "out"
    with pytest.raises(ToolFailure) as refused:
        run_phase1(DomainModel(name="Trips", types={trip}), out, "fastapi_backend")
    assert refused.value.code == "invalid_name"
    assert "attribute of class Trip 'from': the name is a Python keyword" in refused.value.message
    assert not out.exists()


def test_checks_name_syntax_import_and_startup_problems():
    files = {
        "app/main_api.py": b"import fastapi_not_here\nimport routers\n",
        "app/routers/__init__.py": b"",
        "app/broken.py": b"def f(:\n",
        "app/requirements.txt": b"fastapi-not-here==1.0\n",
    }
    report = check_files(files, "app", "main_api")
    messages = [(f.severity, f.message) for f in report.findings]
    assert ("blocker", "syntax error in app/broken.py line 1: invalid syntax") in messages or any(
        s == "blocker" and m.startswith("syntax error in app/broken.py") for s, m in messages)
    assert any(s == "warning" and m.startswith("missing module: fastapi_not_here") for s, m in messages)
    assert report.app_import == "skipped: syntax errors"
    boom = {"app/main_api.py": b"import json\nraise RuntimeError('no database configured')\n"}
    report = check_files(boom, "app", "main_api")
    assert report.app_import == "failed"
    (finding,) = report.blockers
    assert finding.message.startswith("application startup: importing main_api failed: RuntimeError: no database configured")
    from kernel_ext.hosting.events import make_event

    event = make_event("finding", "run-1", **finding.as_event())  # findings are the pipeline's event shape
    assert event.severity == "blocker" and event.path == "app/main_api.py"
    guarded = {"app/main_api.py": b"try:\n    import optional_thing\nexcept ImportError:\n    optional_thing = None\n"}
    assert check_files(guarded, "app", "main_api").findings == []


def test_authorship_split_after_edits(library_app, tmp_path):
    _, result, ledger = library_app
    generated = {f.path: f.sha256 for f in result.files}
    assert ledger.files == generated
    current = dict(generated)
    current["backend/main_api.py"] = "0" * 64
    current["backend/auth.py"] = "1" * 64
    del current["backend/bal_stdlib.py"]
    split = authorship_split(generated, current)
    assert split["generator_llm_modified"] == ["backend/main_api.py"]
    assert split["llm_authored"] == ["backend/auth.py"]
    assert split["generator_deleted"] == ["backend/bal_stdlib.py"]
    assert len(split["generator_untouched"]) == len(generated) - 2
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.py").write_text("x")
    (tmp_path / ".besser").mkdir()
    (tmp_path / ".besser" / "state").write_text("y")
    assert list(tree_hashes(tmp_path)) == ["a/x.py"]


def test_phase1_publishes_through_the_fence(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    app = tmp_path / "app"
    app.mkdir()
    os.symlink(outside, app / "backend")
    with pytest.raises(ToolFailure) as info:
        run_phase1(build_library_model(), app, "fastapi_backend", check=False)
    assert info.value.code == "symlink_refused"
    assert list(outside.iterdir()) == []


def test_generate_cli(tmp_path):
    out = tmp_path / "out"
    proc = cli("generate", "example:library", "--out", str(out), "--generator", "sqlalchemy", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["generator"] == "sqlalchemy" and result["ok"] and (out / "sqlalchemy" / "sql_alchemy.py").is_file()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    proc = cli("generate", str(bad), "--out", str(tmp_path / "o2"))
    assert proc.returncode == 2 and "not_a_model" in proc.stderr and not (tmp_path / "o2").exists()
    assert cli("generate", "example:library", "--out", str(tmp_path / "o3"), "--generator", "react").returncode == 2


@pytest.mark.parametrize("request_text", [None, "Add CORS for https://x.example"])
def test_generate_into_a_place_it_cannot_write_is_one_named_line(request_text, tmp_path):
    """``--out`` under a file (a folder that cannot be made, as a read-only one): one line, exit 2, no traceback,
    for Phase 1 alone and for the whole run."""
    blocker = tmp_path / "a-file"
    blocker.write_text("kept\n")
    proc = cli("generate", "example:library", *([request_text] if request_text else []), "--out", str(blocker / "out"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: io_error: Not a directory: {blocker / 'out'}")
    assert blocker.read_text() == "kept\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_the_app_import_runs_only_in_the_sandbox(tmp_path):
    """Generated code is model-derived: it is imported confined, or not at all (fail closed)."""
    planted = tmp_path / "escaped.txt"
    hostile = {"app/main_api.py": f"open({str(planted)!r}, 'w').write('x')\n".encode()}
    refused = check_files(hostile, "app", "main_api", policy="no-such-tier")  # no tier satisfies it
    assert refused.app_import.startswith("skipped: ") and refused.app_import_tier == ""
    (finding,) = refused.findings
    assert finding.code == "sandbox_unavailable" and finding.severity == "warning" and not planted.exists()
    from kernel_ext.sandbox.config import startup_settings
    from kernel_ext.sandbox.tiers import choose_tier

    if choose_tier(startup_settings().policy).tier in (None, "off"):
        pytest.skip("no confining sandbox tier on this host")
    confined = check_files(hostile, "app", "main_api")  # the operator's tier: the write fails inside
    assert confined.app_import == "failed" and confined.app_import_tier in ("bwrap", "landlock")
    assert not planted.exists()


def test_imports_read_off_bytecode_miss_none_the_tree_would_report():
    """A file is made a tree only when its bytecode names a module nobody provides: imports inside
    functions, after ``;`` or behind a line continuation are still found, a guarded one still is not."""
    files = {
        "app/a.py": b"import json\ndef f():\n    import not_here_in_a_function\n",
        "app/b.py": b"x = 1; import not_here_after_semicolon\n",
        "app/c.py": b"import os, \\\n    not_here_continued\n",
        "app/d.py": b"try:\n    import not_here_guarded\nexcept ImportError:\n    pass\nfrom . import sibling\n",
    }
    report = check_files(files, "app", None)
    missing = sorted(f.message.split()[2] for f in report.findings if f.message.startswith("missing module:"))
    assert missing == ["not_here_after_semicolon", "not_here_continued", "not_here_in_a_function"]
