"""The export's builders, one promise at a time, on values and records made here (``hosting/export``):
stored text is shown fenced or escaped, never as markup; the runnable cells are the host's templates
with values as literals. The whole exports (a real demo run) are ``test_export*.py``."""

from __future__ import annotations

import pytest

from kernel_ext.hosting.export.text import bullets, cell, fence, inline, new_file_diff


@pytest.mark.parametrize(("text", "ticks"), [
    ("plain", 3), ("a `b` c", 3), ("``two``", 3), ("```\n# heading", 4), ("````", 5), ("x\n`````y", 6),
])
def test_a_fence_is_longer_than_any_run_of_backticks_inside(text, ticks):
    shown = fence(text, "py")
    assert shown == f"{'`' * ticks}py\n{text}\n{'`' * ticks}"
    lines = shown.split("\n")
    closers = [n for n, line in enumerate(lines) if line.startswith("`" * ticks)]
    assert closers == [0, len(lines) - 1]  # no line of the text closes it


def test_a_fence_drops_trailing_newlines_only_and_has_no_language_by_default():
    assert fence("a\n\n") == "```\na\n```"
    assert fence("\na ") == "```\n\na \n```"


def test_a_table_cell_escapes_every_markup_character():
    assert cell("a|b\nc\\d`e<f*g_h[i") == "a\\|b c\\\\d\\`e&lt;f\\*g\\_h\\[i"
    assert cell(3) == "3"
    assert cell("\\|") == "\\\\\\|"  # the backslash first: an escape of the text's own stays text


@pytest.mark.parametrize(("text", "shown"), [
    ("a/b.py", "`a/b.py`"),
    ("a`b", "``a`b``"),
    ("x``y", "```x``y```"),
    ("`edge", "`` `edge ``"),
    ("edge`", "`` edge` ``"),
    ("two\nlines", "`two lines`"),
])
def test_inline_code_has_a_fence_no_backtick_inside_closes(text, shown):
    assert inline(text) == shown


def test_bullets_show_each_name_as_inline_code_or_say_none():
    assert bullets(["a.py", "b`c"]) == "- `a.py`\n- ``b`c``"
    assert bullets([]) == "*none*"
    assert bullets([], empty="nothing") == "*nothing*"


def test_a_new_file_is_a_diff_from_nothing():
    diff = new_file_diff("app/x.py", "one\ntwo\n")
    assert "+one\n+two" in diff and "-" not in diff.replace("--- ", "").split("@@")[-1]
    assert "app/x.py" in diff


# -- the runnable cells (``rerun``), on the demo run's record changed one field at a time ----------------

import ast  # noqa: E402
import json  # noqa: E402

from export_fixtures import demo_run, run_copy  # noqa: E402,F401

from kernel_ext.hosting.events import RunStarted  # noqa: E402
from kernel_ext.hosting.export import rerun  # noqa: E402
from kernel_ext.hosting.export.record import decisions, read_run  # noqa: E402


def literals(source: str) -> dict[str, object]:
    """Every ``NAME = <literal>`` a cell assigns, evaluated as a literal (never run)."""
    found = {}
    for node in ast.parse(source, mode="exec").body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return found


def with_provider(record, kind: str, shell: bool = False):
    started = record.started
    assert started is not None
    changed = started.model_copy(update={"provider_kind": kind, "shell_tools_enabled": shell})
    record.events = [changed if isinstance(e, RunStarted) else e for e in record.events]
    return record


def test_the_rerun_carries_every_option_the_run_set_and_its_request_decisions_and_files(run_copy):  # noqa: F811
    record = read_run(run_copy)
    set_options = {"target": "fastapi_backend", "max_turns": 7, "max_cost_usd": 0.5, "max_runtime_s": 60.0,
                   "auto_fix": False, "repair_rounds": 0, "enable_import_smoke_check": True}
    record.request.update(set_options, approve="all", llm_model="not replayed")
    cells = rerun.rerun_cells(record)
    assert [kind for kind, _ in cells] == ["markdown", "code", "code", "code"]
    cassette, generate, compare = (literals(source) for _, source in cells[1:])
    assert generate["OPTIONS"] == set_options  # a falsy value the run set is the run's too
    assert generate["REQUEST"] == record.request["request"] and generate["DECISIONS"] == decisions(record)
    assert generate["DECISIONS"] and all(isinstance(v, bool) for v in generate["DECISIONS"].values())
    source = cells[2][1]
    assert f"prefix='rerun-{record.run_id}-'" in source and "provider=ReplayProvider(CASSETTE, strict=False)" in source
    assert "allow_shell_tools=False" in source
    assert compare["RECORDED"] == record.recipe["files"] and list(compare["RECORDED"]) == sorted(record.recipe["files"])
    assert cassette["TURNS"] == [json.dumps(json.loads(line)) for line in record.turns.split("\n") if line.strip()]
    assert "CASSETTE = Path('" + record.run_id + ".turns.cassette.jsonl')" in cells[1][1]


def test_a_run_without_a_request_file_reruns_its_recipes_request_with_no_options(run_copy):  # noqa: F811
    record = with_provider(read_run(run_copy), "replay", shell=True)
    record.request = {}
    generate = [source for kind, source in rerun.rerun_cells(record) if "REQUEST =" in source][0]
    assert literals(generate)["REQUEST"] == record.recipe["request"] and literals(generate)["OPTIONS"] == {}
    assert "allow_shell_tools=True" in generate


def test_the_rerun_asks_what_the_request_file_asked_before_the_recipe_and_else_nothing(run_copy):  # noqa: F811
    record = read_run(run_copy)
    record.request["request"] = "the request as the person typed it"
    record.recipe["request"] = "the recipe's copy"

    def asked() -> object:
        (generate,) = [source for _, source in rerun.rerun_cells(record) if "REQUEST =" in source]
        return literals(generate)["REQUEST"]

    assert asked() == "the request as the person typed it"
    record.request = {}
    assert asked() == "the recipe's copy"
    del record.recipe["request"]
    assert asked() == ""


def test_a_run_that_never_said_it_started_reruns_without_provider_or_shell_tools(run_copy):  # noqa: F811
    record = read_run(run_copy)
    record.events = [e for e in record.events if not isinstance(e, RunStarted)]
    cells = rerun.rerun_cells(record)
    assert [kind for kind, _ in cells] == ["markdown", "code", "code"]
    assert "allow_shell_tools=False" in cells[1][1] and "provider='none'" in cells[1][1]


def test_a_run_with_no_provider_reruns_with_none_and_writes_no_cassette(run_copy):  # noqa: F811
    record = with_provider(read_run(run_copy), "none")
    record.turns = None
    cells = rerun.rerun_cells(record)
    assert [kind for kind, _ in cells] == ["markdown", "code", "code"]
    assert "the run had no provider" in cells[0][1] and "replay provider answers" not in cells[0][1]
    assert "provider='none'" in cells[1][1] and "TURNS" not in cells[1][1] + cells[2][1]


def test_a_provider_run_whose_turns_were_not_recorded_is_not_offered_a_rerun(run_copy):  # noqa: F811
    record = read_run(run_copy)
    record.turns = None
    ((kind, text),) = rerun.rerun_cells(record)
    assert kind == "markdown" and "turns were not recorded" in text and text.startswith("## Re-run it offline\n\n")
    record.turns = ""  # recorded, empty: the same
    assert len(rerun.rerun_cells(record)) == 1


@pytest.mark.parametrize("where", ["request", "recipe"])
def test_a_run_that_continued_another_is_not_offered_a_rerun(where, run_copy):  # noqa: F811
    record = read_run(run_copy)
    (record.request if where == "request" else record.recipe)["base_run_id"] = "20240101-000000-00000a"
    if where == "recipe":
        record.request.pop("base_run_id", None)
    ((kind, text),) = rerun.rerun_cells(record)
    assert kind == "markdown" and "continued run `20240101-000000-00000a`'s app" in text


def test_turns_are_cut_as_values_and_a_line_that_is_not_json_as_text(run_copy):  # noqa: F811
    key = "sk-live-" + "Q7x2" * 8
    record = read_run(run_copy)
    lines = record.turns.split("\n")
    lines[1] = json.dumps({**json.loads(lines[1]), "planted": f"the key {key} here"})
    record.turns = "\n".join([*lines, f"not json {key}", "", "  "])
    (cassette,) = [source for _, source in rerun.rerun_cells(record, (key,)) if "TURNS =" in source]
    turns = literals(cassette)["TURNS"]
    assert key not in cassette and len(turns) == len([line for line in lines if line.strip()]) + 1
    assert json.loads(turns[1])["planted"] == "the key [redacted] here"
    assert turns[-1] == "not json [redacted]"
    assert all(t.isascii() for t in turns)  # as the recorder writes it


def test_the_model_cells_check_the_recorded_digest_and_a_cut_form_says_so(run_copy):  # noqa: F811
    record = read_run(run_copy)
    digest = record.recipe["model"]["digest"]
    note, code, check = rerun.model_cells(record)
    assert note[0] == "markdown" and code[1] == record.model_code and literals(check[1]) == {}
    assert f"assert model_digest(domain_model) == '{digest}'" in check[1]
    name = record.recipe["model"]["form"]["name"]
    record.model_code = None
    record.recipe["model"]["form"]["name"] = name + "-sk-live-" + "Q7x2" * 8  # a key-shaped name: the form is cut
    record.recipe["model"]["form"] = json.loads(json.dumps(record.recipe["model"]["form"]))
    _, code, check = rerun.model_cells(record)
    assert literals(check[1])["RUN_DIGEST"] == digest and "assert" not in check[1]
    assert "sk-live-" not in code[1]


# -- where and how the file is written (``notebook``) ---------------------------------------------------

import os  # noqa: E402

import nbformat  # noqa: E402

from kernel_ext.hosting.export import notebook  # noqa: E402
from kernel_ext.hosting.export.record import ExportRefused  # noqa: E402


def refused(code: str, call, *args, **kwargs) -> str:
    with pytest.raises(ExportRefused) as caught:
        call(*args, **kwargs)
    assert caught.value.code == code and "\n" not in caught.value.message
    return caught.value.message


def test_the_target_is_a_notebook_name_or_a_folder_for_one_and_never_a_link(tmp_path, monkeypatch):
    run_id = "20240101-000000-00000a"
    monkeypatch.chdir(tmp_path)
    assert notebook.target_path(run_id, None) == tmp_path / f"{run_id}.ipynb"
    assert notebook.target_path(run_id, tmp_path) == tmp_path / f"{run_id}.ipynb"
    assert notebook.target_path(run_id, tmp_path / "x.ipynb") == tmp_path / "x.ipynb"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert notebook.target_path(run_id, "~/y.ipynb") == tmp_path / "y.ipynb"
    assert "x.txt is not a notebook name" in refused("INVALID_PATH", notebook.target_path, run_id, tmp_path / "x.txt")
    assert "is not a folder" in refused("INVALID_PATH", notebook.target_path, run_id, tmp_path / "no" / "x.ipynb")
    (tmp_path / "x.ipynb").write_text("kept")
    assert "pass --force" in refused("EXPORT_EXISTS", notebook.target_path, run_id, tmp_path / "x.ipynb")
    assert notebook.target_path(run_id, tmp_path / "x.ipynb", force=True) == tmp_path / "x.ipynb"
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "folder")
    (tmp_path / "folder" / f"{run_id}.ipynb").symlink_to(tmp_path / "x.ipynb")
    (tmp_path / "dangling.ipynb").symlink_to(tmp_path / "nowhere.ipynb")
    for to in (tmp_path / "link", tmp_path / "folder", tmp_path / "dangling.ipynb"):
        for force in (False, True):
            assert "symbolic link" in refused("INVALID_PATH", notebook.target_path, run_id, to, force=force)
    refused("INVALID_RUN_ID", notebook.target_path, "../escape", tmp_path)
    assert (tmp_path / "x.ipynb").read_text() == "kept"


def test_a_notebook_is_written_whole_and_an_existing_one_only_replaced_with_force(tmp_path):
    target = tmp_path / "n.ipynb"
    notebook.write_notebook(target, "first")
    assert target.read_text() == "first"
    assert "pass --force" in refused("EXPORT_EXISTS", notebook.write_notebook, target, "second")
    assert target.read_text() == "first"
    notebook.write_notebook(target, "second", force=True)
    umask = os.umask(0o022)
    os.umask(umask)
    assert target.read_text() == "second" and target.stat().st_mode & 0o777 == 0o666 & ~umask  # as any new file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.ipynb"]  # no temporary left
    os.chmod(tmp_path, 0o500)
    try:
        if os.access(tmp_path, os.W_OK):  # root writes anywhere: a missing folder instead
            message = refused("EXPORT_UNWRITABLE", notebook.write_notebook, tmp_path / "gone" / "n.ipynb", "x")
        else:
            message = refused("EXPORT_UNWRITABLE", notebook.write_notebook, tmp_path / "m.ipynb", "x")
    finally:
        os.chmod(tmp_path, 0o700)
    assert message.startswith("cannot write ")


def test_a_notebook_from_the_server_is_validated_before_it_is_written():
    good = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("hi")])
    text = notebook.checked_text(json.loads(nbformat.writes(good)))
    assert text.endswith("}\n") and nbformat.reads(text, as_version=4).cells[0].source == "hi"
    for bad in ({}, {"cells": "no"}, [], "text", {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"x": 1}]}):
        assert "the server's notebook is not valid (" in refused("NOT_EXPORTABLE", notebook.checked_text, bad)


def test_a_run_is_found_by_its_id_in_the_store_only(tmp_path):
    store = tmp_path / "runs"
    (store / "20240101-000000-00000a").mkdir(parents=True)
    (store / "20240101-000000-00000a" / "events.jsonl").write_text("")
    assert notebook.find_run(store, "20240101-000000-00000a") == store / "20240101-000000-00000a"
    assert "no run '20240101-000000-00000b'" in refused("RUN_NOT_FOUND", notebook.find_run, store, "20240101-000000-00000b")
    refused("INVALID_RUN_ID", notebook.find_run, store, "../runs/20240101-000000-00000a")


def test_the_notebook_says_what_run_it_is_and_opens_as_ipykernel_saves_it(run_copy, tmp_path):  # noqa: F811
    written = nbformat.read(notebook.export_run(run_copy, tmp_path, known=()), as_version=4)
    record = read_run(run_copy)
    assert written.metadata["besser_export"] == {"format": notebook.FORMAT, "run_id": record.run_id,
                                                 "status": record.done.status, "model_digest": record.recipe["model"]["digest"]}
    assert written.metadata["kernelspec"] == {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    assert written.metadata["language_info"]["name"] == "python" and written.metadata["language_info"]["pygments_lexer"] == "ipython3"
    kinds = [c.cell_type for c in written.cells]
    assert kinds[0] == "markdown" and kinds[-1] == "code" and written.cells[0].source.startswith(f"# Run `{record.run_id}`")
