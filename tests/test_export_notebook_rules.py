"""The notebook export's rules a person relies on, each on the real demo run (``hosting/export/notebook``):
the head names the version that wrote it, code cells are never edited by the cut, a run whose runnable
cells fail their check is refused whole, an existing notebook is kept unless ``force`` is passed, the
file is UTF-8 whatever the locale, and each refusal is one named line naming its cause, with nothing
left on disk. (Issue 30 item 4: the survivors of the module's mutation run.)"""

from __future__ import annotations

import ast
import json
import locale
import secrets
from pathlib import Path

import nbformat
import pytest
from export_fixtures import demo_run, folder_state, run_copy  # noqa: F401 - fixtures requested by name

from kernel_ext.hosting.export import notebook
from kernel_ext.hosting.export.record import ExportRefused, read_run
from kernel_ext.version import __version__


def refused(code: str, call, *args, **kwargs) -> str:
    with pytest.raises(ExportRefused) as caught:
        call(*args, **kwargs)
    assert caught.value.code == code and "\n" not in caught.value.message
    return caught.value.message


def test_the_head_names_the_version_that_exported_the_run(run_copy):  # noqa: F811
    head = notebook.build_notebook(read_run(run_copy)).cells[0].source
    assert f"Exported by `%besser export` (besser-jupyter-agent {__version__})." in head


def test_a_known_secret_that_is_a_word_of_the_hosts_code_leaves_the_runnable_cells_as_they_are(run_copy):  # noqa: F811
    """The cut reaches values before they become literals, never code text: a secret that happens
    to be a word of the host's template (here ``mkdtemp``) leaves the cells runnable, byte for byte."""
    record = read_run(run_copy)
    plain = [c.source for c in notebook.build_notebook(record).cells if c.cell_type == "code"]
    cut = [c.source for c in notebook.build_notebook(read_run(run_copy), ("mkdtemp",)).cells if c.cell_type == "code"]
    assert any("tempfile.mkdtemp(" in source for source in plain)
    assert cut == plain
    for source in cut:
        compile(source, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)  # as IPython runs a cell


def test_a_run_without_a_model_digest_says_so_with_an_empty_one(run_copy):  # noqa: F811
    record = read_run(run_copy)
    del record.recipe["model"]["digest"]
    assert notebook.build_notebook(record).metadata["besser_export"]["model_digest"] == ""


def test_runnable_cells_that_fail_their_check_refuse_the_export_whole(run_copy, tmp_path):  # noqa: F811
    request = run_copy / ".besser" / "request.json"
    asked = json.loads(request.read_text(encoding="utf-8"))
    request.write_text(json.dumps({**asked, "max_cost_usd": float("nan")}), encoding="utf-8")  # no literal form
    out = tmp_path / "out"
    out.mkdir()
    message = refused("CODE_NOT_BUILT", notebook.export_run, run_copy, out, known=())
    assert message == f"run {run_copy.name}'s runnable cells failed their check (a float that is not finite has no literal form)"
    assert list(out.iterdir()) == []


def test_an_existing_notebook_is_kept_unless_force_is_passed(run_copy, tmp_path):  # noqa: F811
    target = tmp_path / "kept.ipynb"
    target.write_text("a person's notebook", encoding="utf-8")
    assert "pass --force" in refused("EXPORT_EXISTS", notebook.export_run, run_copy, target, known=())
    assert target.read_text(encoding="utf-8") == "a person's notebook"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["besser_runs", "kept.ipynb"]


def test_a_typed_name_that_is_no_run_id_is_named_in_the_refusal(run_copy, tmp_path):  # noqa: F811
    before = folder_state(tmp_path)
    message = refused("INVALID_RUN_ID", notebook.export_run, "../besser_runs", tmp_path, runs_dir=run_copy.parent, known=())
    assert message.startswith("'../besser_runs' is not a run id (3 to 64 letters")
    bad = tmp_path / "besser_runs" / "a run"  # a folder handed over whose name cannot name a notebook
    run_copy.rename(bad)
    message = refused("INVALID_RUN_ID", notebook.export_run, bad, tmp_path, known=())
    assert message.startswith("'a run' is not a run id (3 to 64 letters")
    assert folder_state(tmp_path) == {k.replace(run_copy.name, "a run"): v for k, v in before.items()}


def test_a_notebook_from_the_server_that_is_not_one_is_refused_naming_the_kind_of_fault():
    assert refused("NOT_EXPORTABLE", notebook.checked_text, {"cells": "no"}) == "the server's notebook is not valid (ValidationError)"
    assert refused("NOT_EXPORTABLE", notebook.checked_text, []) == "the server's notebook is not valid (AttributeError)"


def test_a_long_notebook_name_the_folder_takes_is_written(run_copy, tmp_path):  # noqa: F811
    target = tmp_path / ("n" * 200 + ".ipynb")  # 206 bytes: the temporary beside it stays a legal name
    assert notebook.export_run(run_copy, target, known=()) == target
    assert nbformat.read(target, as_version=4).metadata["besser_export"]["run_id"] == run_copy.name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["besser_runs", target.name]


def test_the_longest_legal_name_is_written_and_one_longer_is_one_line_naming_why(run_copy, tmp_path):  # noqa: F811
    """The temporary's name does not grow with the target's: a 255-byte name (the file system's most) is
    written whole; a 256-byte one is refused in one line before any work, nothing written."""
    out = tmp_path / "out"
    out.mkdir()
    longest = out / ("n" * 249 + ".ipynb")
    assert notebook.export_run(run_copy, longest, known=()) == longest
    assert [p.name for p in out.iterdir()] == [longest.name]
    nbformat.validate(nbformat.read(longest, as_version=4))
    longest.unlink()
    target = out / ("n" * 250 + ".ipynb")
    message = refused("INVALID_PATH", notebook.export_run, run_copy, target, known=())
    assert message == f"cannot write {target}: File name too long"
    assert list(out.iterdir()) == []


def test_a_home_folder_of_a_user_this_machine_lacks_is_one_line(run_copy, tmp_path, monkeypatch):  # noqa: F811
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    message = refused("INVALID_PATH", notebook.export_run, run_copy, "~no-such-user-here/n.ipynb", known=())
    assert message == "cannot write ~no-such-user-here/n.ipynb: no home folder for '~no-such-user-here'"
    assert list(here.iterdir()) == []


def test_a_folder_gone_before_the_write_is_one_line_naming_why(tmp_path):
    """The folder was checked, then removed before the write (``write_notebook`` is the write itself)."""
    target = tmp_path / "gone" / "n.ipynb"
    assert refused("EXPORT_UNWRITABLE", notebook.write_notebook, target, "{}") == f"cannot write {target}: No such file or directory"
    assert list(tmp_path.iterdir()) == []


def test_a_link_planted_at_the_temporary_name_is_never_written_through(run_copy, tmp_path, monkeypatch):  # noqa: F811
    """The temporary's name is unguessable; fixed here, as if guessed, to plant a link at it before the write."""
    monkeypatch.setattr(secrets, "token_hex", lambda nbytes=None: "guessed")
    victim = tmp_path / "victim.txt"
    victim.write_text("not the export's to change", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".besser-export-guessed.tmp").symlink_to(victim)
    refused("EXPORT_UNWRITABLE", notebook.export_run, run_copy, out / "n.ipynb", known=())
    assert victim.read_text(encoding="utf-8") == "not the export's to change"
    assert not (out / "n.ipynb").exists()


def test_the_notebook_is_utf8_whatever_the_locale(run_copy, tmp_path):  # noqa: F811
    recipe = run_copy / "run.json"
    data = json.loads(recipe.read_text(encoding="utf-8"))
    data["request"] = "Génère un backend ✓ — 生成"
    recipe.write_text(json.dumps(data), encoding="utf-8")
    request = run_copy / ".besser" / "request.json"
    request.unlink(missing_ok=True)  # the recipe's request is the one shown
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # an ASCII locale: a file opened without an encoding would refuse the text
    try:
        target = notebook.export_run(run_copy, tmp_path / "u.ipynb", known=())
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)
    shown = nbformat.reads(Path(target).read_bytes().decode("utf-8"), as_version=4)
    assert any("Génère un backend ✓ — 生成" in c.source for c in shown.cells if c.cell_type == "markdown")
