# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""Method bodies from a model enter generated code only after a person saw them (G0 finding 1).

A model's method body lands in the class body of ``sql_alchemy.py`` and runs at import. Every
path into Phase 1 shows foreign bodies on a card (``model_method_bodies``, category
``generate``) before generating: approved, the body is in the generated code; denied, or the
operator's ``BESSER_MODEL_METHOD_BODIES=off``, the methods are stubs and a named finding says
so. The shipped examples' own bodies need no card. A request cannot turn bodies on.
Entry points: the Python API (a scripted host approver, and ``approve="all"``), REST (the
card answered over HTTP), the command line's Phase-1-only path (no card: ``--approve``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    poll,
    runs_dir,
)

from kernel_ext.boundary import ScriptedApprover
from kernel_ext.model.examples import build_library_model
from kernel_ext.model.jsonform import model_to_dict
from kernel_ext.server.handlers.base import STATE_KEY

REPO = Path(__file__).resolve().parents[2]
MARKER = "MODEL-BODY-7f3a"
CODE = f"def shout(self):\n    return '{MARKER}'\n"


def model_with_body():
    from besser.BUML.metamodel.structural import Method, StringType

    model = build_library_model()
    model.get_class_by_name("Book").add_method(Method(name="shout", type=StringType, code=CODE))
    return model


def generated_text(app: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(app.rglob("*.py")))


def of_type(run, kind: str) -> list:
    return [e for e in run.events.events if e.type == kind]


def api_run(tmp_path: Path, model, **options):
    from kernel_ext.pipeline.generation import generate

    async def go():
        run = generate(model, "A SQLAlchemy model", run_dir=tmp_path / "run", provider="none", target="sqlalchemy", **options)
        await asyncio.wait_for(run.wait(), 300)
        return run

    return asyncio.run(go())


@pytest.mark.parametrize("decision", [True, False])
def test_the_api_shows_the_bodies_on_a_card_and_generates_them_only_on_yes(tmp_path, monkeypatch, decision):
    monkeypatch.delenv("BESSER_MODEL_METHOD_BODIES", raising=False)
    model = model_with_body()
    approver = ScriptedApprover([decision])
    run = api_run(tmp_path, model, approver=approver)
    [asked] = approver.seen
    assert asked.name == "model_method_bodies" and asked.category == "generate"
    assert asked.argument("methods") == [{"class": "Book", "method": "shout", "code": CODE}]
    assert f"+    return '{MARKER}'" in asked.proposal  # the code itself, as a card shows it
    assert "display_name" not in asked.proposal  # the shipped example's own bodies are not asked about
    [card] = of_type(run, "approval_requested")
    assert card.name == "model_method_bodies" and MARKER in card.request["proposal"]
    [resolved] = of_type(run, "approval_resolved")
    assert resolved.approved is decision
    text = generated_text(run.context.layout.app_dir)
    assert "class Book" in text  # Phase 1 ran either way
    findings = [f.message for f in of_type(run, "finding") if f.source == "model"]
    if decision:
        assert MARKER in text
    else:
        assert MARKER not in text and "def shout" not in text
        assert any("not generated" in m and "Book.shout" in m and "not approved" in m for m in findings)
    assert next(iter(m for m in model.get_class_by_name("Book").methods if m.name == "shout")).code == CODE  # caller's object untouched


def test_approve_all_passes_the_card_and_the_operator_can_turn_bodies_off(tmp_path, monkeypatch):
    monkeypatch.delenv("BESSER_MODEL_METHOD_BODIES", raising=False)
    auto = api_run(tmp_path / "auto", model_with_body(), approve="all")
    assert [e.by for e in of_type(auto, "approval_resolved")] == ["auto"]
    assert MARKER in generated_text(auto.context.layout.app_dir)

    monkeypatch.setenv("BESSER_MODEL_METHOD_BODIES", "off")
    off = api_run(tmp_path / "off", model_with_body(), approve="all")
    assert of_type(off, "approval_requested") == []  # nothing to ask: the operator said no
    assert MARKER not in generated_text(off.context.layout.app_dir)
    assert any("BESSER_MODEL_METHOD_BODIES=off" in f.message and "Book.shout" in f.message for f in of_type(off, "finding"))


def test_the_shipped_examples_need_no_card(tmp_path, monkeypatch):
    from kernel_ext.model.examples import synthetic_model
    from kernel_ext.model.method_bodies import foreign_bodies, model_bodies

    assert model_bodies(build_library_model()) and foreign_bodies(build_library_model()) == []
    assert foreign_bodies(synthetic_model(30)) == []
    assert [b.where for b in foreign_bodies(model_with_body())] == ["Book.shout"]


def test_a_request_cannot_turn_bodies_on():
    from kernel_ext.hosting.options import OperatorSettings
    from kernel_ext.hosting.requests import parse_request

    request = parse_request({"request": "x", "model_method_bodies": "ask", "BESSER_MODEL_METHOD_BODIES": "ask"})
    assert "model_method_bodies" not in request.model_dump()
    assert OperatorSettings.from_environment({"BESSER_MODEL_METHOD_BODIES": "off"}).model_method_bodies == "off"
    assert OperatorSettings.from_environment({"BESSER_MODEL_METHOD_BODIES": "on"}).model_method_bodies == "ask"


@pytest.mark.parametrize("decision", [True, False])
async def test_rest_runs_ask_on_a_card_answered_over_http(jp_fetch, jp_serverapp, runs_dir, decision):
    body = {"kind": "generate", "request": "A SQLAlchemy model", "provider": "none", "target": "sqlalchemy",
            "model_json": model_to_dict(model_with_body())}
    response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    run = jp_serverapp.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
    call_id = (await poll(run.pending_approvals, timeout=60))[0]
    assert call_id.startswith("model-methods-")
    card = of_type(run, "approval_requested")[0]
    assert MARKER in card.request["proposal"] and not run.context.layout.app_dir.joinpath("sql_alchemy.py").exists()
    await jp_fetch("besser-agent", "runs", run.id, "approvals", call_id, method="POST", body=json.dumps({"approved": decision}))
    await asyncio.wait_for(run.wait(), 300)
    text = generated_text(run.context.layout.app_dir)
    assert "class Book" in text and (MARKER in text) is decision
    if not decision:
        assert any("Book.shout" in f.message for f in of_type(run, "finding") if f.source == "model")


@pytest.mark.parametrize("approve", ["none", "edits"])
def test_the_phase1_command_line_keeps_bodies_only_with_approve(tmp_path, approve):
    source = tmp_path / "course.json"
    source.write_text(json.dumps(model_to_dict(model_with_body())))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("BESSER_MODEL_METHOD_BODIES", None)
    done = subprocess.run([sys.executable, "-m", "kernel_ext", "generate", str(source), "--out", str(out), "--generator",
                           "sqlalchemy", "--no-check", "--approve", approve], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    text = generated_text(out)
    assert "class Book" in text and (MARKER in text) is (approve == "edits")
    if approve == "none":
        assert "Book.shout" in done.stdout and "--approve edits" in done.stdout


def test_more_code_than_a_card_shows_is_never_asked_for():
    from besser.BUML.metamodel.structural import Method

    from kernel_ext.pipeline.method_bodies import MAX_SHOWN_CHARS, settle_method_bodies

    model = build_library_model()
    book = model.get_class_by_name("Book")
    for i in range(4):
        book.add_method(Method(name=f"m{i}", code=f"def m{i}(self):\n    return {'1' * (MAX_SHOWN_CHARS // 4)}\n"))
    asked = []
    settled = asyncio.run(settle_method_bodies(model, "ask", lambda request: asked.append(request) or True, lambda event: None))
    assert asked == [] and "more than one card shows" in settled.findings[0].message
    assert all(not m.code for m in settled.model.get_class_by_name("Book").methods if m.name.startswith("m"))
