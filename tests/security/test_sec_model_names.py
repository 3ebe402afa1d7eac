# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""Names are identifiers before they are code: every entry point refuses a bad name by name.

The family (G0 finding 1): a model whose names are pasted into generated source raw (a
newline or tab in an attribute name, a keyword, a leading digit, a quote, a non-ASCII or
very long name, a dunder method) and PlantUML's ``@startuml NAME`` (pasted into the
database URL). Every entry point that reaches Phase 1 (the command line, both Phase-1-only
and the pipeline; the Python API, ``run_phase1`` and ``generate``; REST ``POST runs`` with
``model_json`` or ``model_path``; the ``%besser generate`` magic in-process) must refuse with
``invalid_name`` naming the element, write no generated code, and leave the disk unchanged.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from file_tool_helpers import tree_state
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    runs_dir,
)

from kernel_ext.errors import ToolFailure
from kernel_ext.model.examples import build_library_model
from kernel_ext.model.jsonform import model_to_dict
from kernel_ext.server.handlers.base import STATE_KEY

REPO = Path(__file__).resolve().parents[2]
PAYLOAD = 'x";__import__("os").system("touch_PWNED");y="'  # no spaces: BESSER's own rule lets it through


def _set(model, kind: str, name: str):
    """The Library example with one element renamed to ``name`` (BESSER accepts each of these)."""
    from besser.BUML.metamodel.structural import Method, Property, StringType

    book = model.get_class_by_name("Book")
    if kind == "attribute":
        book.add_attribute(Property(name=name, type=StringType))
    elif kind == "class":
        book.name = name
    elif kind == "method":
        book.add_method(Method(name=name, type=StringType))
    elif kind == "end":
        next(iter(next(iter(model.associations)).ends)).name = name
    elif kind == "model":
        model.name = name
    elif kind == "literal":
        genre = next(t for t in model.types if t.name == "Genre")
        next(iter(genre.literals)).name = name
    return model


# case -> (element kind, bad name, what the refusal names)
CASES = {
    "newline": ("attribute", "ti\ntle", "attribute of class Book 'ti\\x0atle'"),
    "tab": ("class", "Bo\tok", "class 'Bo\\x09ok'"),
    "keyword": ("attribute", "class", "attribute of class Book 'class': the name is a Python keyword"),
    "leading_digit": ("class", "9Book", "class '9Book': the name starts with a digit"),
    "quote": ("end", 'auth"ors', "end of association"),
    "model_name_payload": ("model", PAYLOAD, "the model name"),
    "very_long": ("literal", "L" * 200, "the name is 200 characters long"),
    "non_ascii": ("attribute", "titel\u00e9", "non-ASCII"),
    "dunder": ("method", "__init__", "method of class Book '__init__'"),
}
STARTUML = f"@startuml {PAYLOAD}\nclass Book {{\n  +title: str\n}}\n@enduml\n"


def bad_model(case: str):
    kind, name, _ = CASES[case]
    return _set(build_library_model(), kind, name)


def expected(case: str) -> str:
    return "the '@startuml' name" if case == "startuml" else CASES[case][2]


def model_file(tmp_path: Path, case: str) -> Path:
    """The bad model as a file a person could be handed (JSON, or PlantUML for ``@startuml``)."""
    folder = tmp_path / "models"
    folder.mkdir(exist_ok=True)
    if case == "startuml":
        path = folder / "course.plantuml"
        path.write_text(STARTUML)
    else:
        path = folder / "course.json"
        path.write_text(json.dumps(model_to_dict(bad_model(case))))
    return path


ALL = [*CASES, "startuml"]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cwd = tmp_path / "cwd"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("BESSER_LLM_PROVIDER", None)
    return subprocess.run([sys.executable, "-m", "kernel_ext", "generate", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.timeout(600)  # the CLI's own bound is 300 s
@pytest.mark.parametrize("case", ALL)
@pytest.mark.parametrize("entry", ["cli_phase1", "cli_pipeline", "api_run_phase1", "api_generate"])
def test_a_bad_name_is_refused_by_name_with_nothing_written(tmp_path, case, entry):
    source = model_file(tmp_path, case)
    out = tmp_path / "out"
    (tmp_path / "cwd").mkdir()
    before = tree_state(tmp_path)
    if entry.startswith("cli"):
        extra = ["A FastAPI backend", "--provider", "none"] if entry == "cli_pipeline" else []
        done = _cli(tmp_path, str(source), *extra, "--out", str(out))
        assert done.returncode == 2, done.stdout + done.stderr
        assert "invalid_name" in done.stderr and expected(case) in done.stderr
        assert "Traceback" not in done.stderr
    else:
        subject = source if case == "startuml" else bad_model(case)  # the API takes objects too
        with pytest.raises(ToolFailure) as refused:
            if entry == "api_run_phase1":
                from kernel_ext.generation.phase1 import run_phase1

                run_phase1(subject, out, "fastapi_backend")
            else:
                from kernel_ext.pipeline.generation import generate

                async def start():
                    return generate(subject, "A FastAPI backend", run_dir=out, provider="none")

                asyncio.run(start())
        assert refused.value.code == "invalid_name" and expected(case) in refused.value.message
        assert "\n" not in refused.value.message  # one line a person can read
    assert not out.exists()  # no generated code, no run folder
    assert tree_state(tmp_path) == before
    assert not list(tmp_path.rglob("*PWNED*"))


@pytest.mark.parametrize("case", ["newline", "keyword", "model_name_payload", "startuml"])
async def test_rest_runs_refuse_a_bad_name_by_name(jp_fetch, jp_serverapp, runs_dir, jp_root_dir, tmp_path, case):
    source = model_file(jp_root_dir, case)  # REST model paths lie under the server's root
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file\n")
    body = {"kind": "generate", "request": "A FastAPI backend", "provider": "none", "approve": "all"}
    body |= {"model_path": str(source)} if case == "startuml" else {"model_json": model_to_dict(bad_model(case))}
    before = tree_state(outside, source.parent)
    response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    assert response.code == 201
    run = jp_serverapp.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
    done = await asyncio.wait_for(run.wait(), 60)
    assert done is not None and done.status == "failed"
    errors = [e for e in run.events.events if e.type == "error"]
    assert [e.code for e in errors] == ["INVALID_NAME"] and expected(case) in errors[0].message
    findings = [e for e in run.events.events if e.type == "finding"]
    assert findings and all(f.severity == "blocker" and f.source == "model" for f in findings)
    assert not [e for e in run.events.events if e.type == "phase"]  # refused before any phase
    app = run.context.layout.app_dir
    assert not app.exists() or not any(p.is_file() for p in app.rglob("*"))
    assert sorted(p.name for p in runs_dir.iterdir()) == [run.id]
    assert tree_state(outside, source.parent) == before
    assert not list(tmp_path.rglob("*PWNED*"))


@pytest.fixture
def ip(tmp_path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    for name in ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN", "BESSER_LLM_ENABLE_SHELL_TOOLS"):
        monkeypatch.delenv(name, raising=False)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kernel_ext")
    shell.run_line_magic("reload_ext", "kernel_ext")
    yield shell
    shell.run_line_magic("unload_ext", "kernel_ext")


@pytest.mark.parametrize("case", ["newline", "keyword", "model_name_payload"])
async def test_the_magic_refuses_a_bad_name_by_name(ip, tmp_path, case):
    ip.user_ns["course"] = bad_model(case)
    view = ip.run_line_magic("besser", "generate course 'A FastAPI backend' --provider none --approve all")
    state = await view.wait(timeout=60)
    assert state.status == "failed"
    assert [e["code"] for e in state.errors] == ["INVALID_NAME"] and expected(case) in state.errors[0]["message"]
    run_dir = tmp_path / "besser_runs" / state.run_id
    assert not any(p.is_file() for p in (run_dir / "app").rglob("*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["besser_runs"]
