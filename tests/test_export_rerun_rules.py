# ruff: noqa: F811 - fixtures imported from export_fixtures are requested by name
"""The runnable part of an export (``hosting/export/rerun``), its words and its literals, one rule
at a time on the demo run's record changed one field at a time: which note says where the model's
code came from (the run's own script, one written again, the JSON form and why), the form literal a
person reads and a kernel runs (non-ASCII kept, the recorded model rebuilt), what the re-run's intro
tells a person, and each cell's kind. Cells are run where that is the promise (the model cells
rebuild the run's model and check its digest), in this process, never a live model."""

from __future__ import annotations

import ast
import json

import pytest
from export_fixtures import demo_run, run_copy  # noqa: F401

from kernel_ext.hosting.events import RunStarted
from kernel_ext.hosting.export import rerun
from kernel_ext.hosting.export.notebook import build_notebook
from kernel_ext.hosting.export.record import read_run
from kernel_ext.model.jsonform import model_digest, model_from_dict
from kernel_ext.model.pycode import model_to_python

KEY = "sk-live-" + "Q7x2" * 8
SAID = "The B-UML model the run used, as Python that rebuilds it (run it, change it, generate again)."
WRITTEN_AGAIN = (SAID + " The run kept no script of its own, so this one lists the elements sorted by name; "
                 "generators follow the order elements were created in, so a re-run may order some lines differently.")
CUT_NOTE = ("The B-UML model the run used, in this project's JSON form: its code holds text shaped like a key, "
            "which is cut here, so this model is not byte for byte the run's.")
HEAD = "## Re-run it offline\n\n"


def form_of(source: str) -> object:
    """The JSON form a form cell carries: its one string constant, read as JSON (the cell is not run)."""
    (text,) = [n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and isinstance(n.value, str)
               and n.value.startswith("{")]
    return json.loads(text)


def run_cells(cells: list[tuple[str, str]]) -> dict[str, object]:
    """The model's code cells run in order in one namespace, as a kernel runs them (their own code only)."""
    namespace: dict[str, object] = {}
    for kind, source in cells:
        if kind == "code":
            exec(compile(source, "<cell>", "exec"), namespace)  # noqa: S102 - the host's own cells, checked by codebuild
    return namespace


def set_form(record, form: dict) -> None:
    """The record as if the run had used ``form``: its digest the form's, no script of its own."""
    record.model_code = None
    record.recipe["model"]["form"] = form
    record.recipe["model"]["digest"] = model_digest(model_from_dict(form))


def method_code_with(record, text: str) -> dict:
    form = json.loads(json.dumps(record.recipe["model"]["form"]))
    method = form["classes"][1]["methods"][0]
    method["code"] = method["code"].rstrip("\n") + f"  # {text}\n"
    return form


# -- the model cells: which code, which note ----------------------------------------------------------

def test_the_runs_own_script_is_shown_as_it_is_with_the_note_that_says_so(run_copy, capsys):
    record = read_run(run_copy)
    cells = rerun.model_cells(record)
    assert [kind for kind, _ in cells] == ["markdown", "code", "code"]
    assert cells[0][1] == "## The model\n\n" + SAID
    assert cells[1][1] == record.model_code
    namespace = run_cells(cells)
    assert model_digest(namespace["domain_model"]) == record.recipe["model"]["digest"]
    digest = record.recipe["model"]["digest"]
    assert capsys.readouterr().out == f"Library: the model the run used (digest {digest[:12]})\n"


@pytest.mark.parametrize("script", ["none", "unfaithful"])
def test_a_run_without_a_faithful_script_gets_one_written_again_and_the_note_says_why_lines_may_move(script, run_copy):
    record = read_run(run_copy)
    if script == "none":
        record.model_code = None
    else:  # a stored script that does not rebuild the recorded model is never shown
        assert record.model_code is not None
        record.model_code += "\nextra_name = 'not the builder\\'s text'\n"
    cells = rerun.model_cells(record)
    assert [kind for kind, _ in cells] == ["markdown", "code", "code"]
    assert cells[0][1] == "## The model\n\n" + WRITTEN_AGAIN
    assert cells[1][1] == model_to_python(model_from_dict(record.recipe["model"]["form"]))
    assert model_digest(run_cells(cells)["domain_model"]) == record.recipe["model"]["digest"]


def test_a_model_bessers_script_cannot_carry_is_shown_as_its_json_form_named_why_non_ascii_kept(run_copy, capsys):
    record = read_run(run_copy)
    form = method_code_with(record, "r\u00e9sum\u00e9 \u202e reversed")  # a bidi override: no script is handed out
    set_form(record, form)
    cells = rerun.model_cells(record)
    assert [kind for kind, _ in cells] == ["markdown", "code", "code"]
    assert cells[0][1] == ("## The model\n\nThe B-UML model the run used, in this project's JSON form (the model code "
                           "holds control or format characters (shown as escapes in the JSON form)).")
    assert form_of(cells[1][1]) == form
    assert "r\u00e9sum\u00e9" in cells[1][1] and "\\u00e9" not in cells[1][1]  # a person reads the letters
    assert "\u202e" not in cells[1][1]  # the override is an escape in the literal, never a character
    namespace = run_cells(cells)  # the check cell asserts the recorded digest
    assert model_digest(namespace["domain_model"]) == record.recipe["model"]["digest"]
    assert capsys.readouterr().out.startswith("Library: the model the run used (digest ")


def test_a_form_the_loader_refuses_is_still_shown_with_the_loaders_words(run_copy):
    record = read_run(run_copy)
    record.model_code = None
    record.recipe["model"]["form"]["classes"][0]["attributes"][0]["type"] = "nosuchtype"
    cells = rerun.model_cells(record)
    assert [kind for kind, _ in cells] == ["markdown", "code", "code"]
    assert cells[0][1] == ("## The model\n\nThe B-UML model the run used, in this project's JSON form "
                           "(Author.nationality: unknown type 'nosuchtype').")
    assert form_of(cells[1][1]) == record.recipe["model"]["form"]
    assert "assert model_digest(domain_model) == " in cells[2][1]  # nothing was cut: the digest is checked


@pytest.mark.parametrize("where", ["script", "form"])
def test_a_model_whose_code_holds_a_key_is_shown_as_its_cut_form_and_says_so(where, run_copy, capsys):
    record = read_run(run_copy)
    form = method_code_with(record, f"r\u00e9sum\u00e9 {KEY}")
    set_form(record, form)
    if where == "script":  # the run's own script, faithful, but holding the key
        record.model_code = model_to_python(model_from_dict(form))
    cells = rerun.model_cells(record, (KEY,))
    assert [kind for kind, _ in cells] == ["markdown", "code", "code"]
    assert cells[0][1] == "## The model\n\n" + CUT_NOTE
    shown = form_of(cells[1][1])
    assert KEY not in cells[1][1] and shown["classes"][1]["methods"][0]["code"].endswith("r\u00e9sum\u00e9 [redacted]\n")
    assert "r\u00e9sum\u00e9" in cells[1][1]
    run_cells(cells)  # the cut model is not the run's: the check cell says so and does not assert
    digest = record.recipe["model"]["digest"]
    out = capsys.readouterr().out
    assert out.startswith("Library: the model the run used, with what looked like a key cut (digest ")
    assert out.endswith(f"; the model the run used had {digest[:12]})\n")


def test_a_key_the_form_does_not_hold_leaves_the_form_and_its_digest_check_as_they_were(run_copy):
    record = read_run(run_copy)
    form = method_code_with(record, "\u202e")
    set_form(record, form)
    _, code, check = rerun.model_cells(record, (KEY, "another-known-secret-value"))
    assert form_of(code[1]) == form and f"== '{record.recipe['model']['digest']}'" in check[1]


# -- the re-run cells: what the intro tells a person, the literals ---------------------------------------

def provider(record, kind: str):
    started = record.started
    assert started is not None
    changed = started.model_copy(update={"provider_kind": kind})
    record.events = [changed if isinstance(e, RunStarted) else e for e in record.events]
    return record


def test_the_intro_of_a_replayed_run_says_how_it_is_replayed(run_copy):
    record = read_run(run_copy)
    cells = rerun.rerun_cells(record)
    assert [kind for kind, _ in cells] == ["markdown", "code", "code", "code"]
    assert cells[0][1] == (HEAD + "The cells below generate the app again from the model above, into a fresh folder, "
                           "with no live model: the replay provider answers from the provider turns the run recorded "
                           "(written out below as a cassette), every card is answered as it was decided in the run, "
                           "and the budgets are the run's own. The last cell compares the regenerated app with the "
                           "files the run ended with.")


def test_the_intro_of_a_run_without_a_provider_says_it_had_none(run_copy):
    record = provider(read_run(run_copy), "none")
    cells = rerun.rerun_cells(record)
    assert [kind for kind, _ in cells] == ["markdown", "code", "code"]
    assert cells[0][1] == (HEAD + "The cells below generate the app again from the model above, into a fresh folder, "
                           "with no live model: the run had no provider, every card is answered as it was decided in "
                           "the run, and the budgets are the run's own. The last cell compares the regenerated app with "
                           "the files the run ended with.")


def test_a_run_that_is_not_replayable_says_why_in_whole_words(run_copy):
    record = read_run(run_copy)
    record.turns = None
    assert rerun.rerun_cells(record) == [("markdown", HEAD + (
        "This run's provider turns were not recorded (a run from before runs kept them, or a provider that "
        "recorded to a cassette of its own), so it cannot be replayed from here."))]
    record.request["base_run_id"] = "20240101-000000-00000a"
    assert rerun.rerun_cells(record) == [("markdown", HEAD + (
        "This run continued run `20240101-000000-00000a`'s app, which this notebook does not carry, so it "
        "cannot be re-run from here alone."))]


def test_the_notebook_a_person_opens_holds_the_model_note_and_the_rerun_words(run_copy):
    record = read_run(run_copy)
    notebook = build_notebook(record)
    sources = [(c.cell_type, c.source) for c in notebook.cells]
    assert ("markdown", "## The model\n\n" + SAID) in sources
    index = sources.index(("markdown", "## The model\n\n" + SAID))
    assert [kind for kind, _ in sources[index:index + 3]] == ["markdown", "code", "code"]
    assert sources[-4][0] == "markdown" and sources[-4][1].startswith(HEAD + "The cells below generate the app again")
    assert [kind for kind, _ in sources[-3:]] == ["code", "code", "code"]


def test_a_run_with_no_recorded_files_compares_against_none(run_copy):
    record = read_run(run_copy)
    del record.recipe["files"]
    compare = rerun.rerun_cells(record)[-1][1]
    assert "RECORDED = {}" in compare
    record.recipe["files"] = None
    assert "RECORDED = {}" in rerun.rerun_cells(record)[-1][1]


def test_a_file_whose_name_sounds_secret_keeps_its_hash_and_a_key_in_a_name_is_cut(run_copy):
    record = read_run(run_copy)
    record.recipe["files"] = {"backend/auth.py": "a" * 64, "secrets/api_key.txt": "b" * 64, f"x-{KEY}.py": "c" * 64}
    compare = rerun.rerun_cells(record, (KEY,))[-1][1]
    recorded = ast.literal_eval(compare.split("RECORDED = ", 1)[1].split("  #", 1)[0])
    assert recorded == {"backend/auth.py": "a" * 64, "secrets/api_key.txt": "b" * 64, "x-[redacted].py": "c" * 64}


def test_each_cassette_line_is_written_back_ascii_only_as_the_recorder_writes_it(run_copy):
    record = read_run(run_copy)
    lines = [line for line in record.turns.split("\n") if line.strip()]
    exchange = json.loads(lines[1])
    exchange["planted"] = "r\u00e9sum\u00e9 \u2028 line"
    lines[1] = json.dumps(exchange, ensure_ascii=False)
    record.turns = "\n".join(lines)
    (cassette,) = [source for _, source in rerun.rerun_cells(record) if "TURNS =" in source]
    turns = ast.literal_eval(cassette.split("TURNS = ", 1)[1].split("\nCASSETTE", 1)[0])
    assert turns[1] == json.dumps(exchange) and "\\u00e9" in turns[1]
    assert json.loads(turns[1])["planted"] == "r\u00e9sum\u00e9 \u2028 line"
