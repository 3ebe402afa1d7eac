# ruff: noqa: F811 - fixtures imported from export_fixtures are requested by name
"""An exported run's code cells carry what the model chose only as string constants (issue 28, item 1).

The demo run is given hostile values where a model chooses them: file names in the recorded
manifest, the request, call ids, the recorded provider turns (split by raw line separators, and as
neighbouring list items), a method body in the model. Each is built to straddle a cut of a key a
model can guess (``sk-no-key-required``, or any 12+ character value) set as the exporting process's
known secret: the key's halves on either side of quotes, commas, spaces, ``\\n``, ``\"\"\"``,
backslashes, ``#`` and unicode line separators, followed by code. Every code cell is parsed: with
its constants blanked it is one of the builder's own cells (the clean run's, or the model's JSON
form), so nothing the model chose became a name or a call. Then the notebook runs for real
(nbclient, a real kernel): nothing is created or changed outside its folder. A builder that cut
code text (the old way) is refused by the check, and nothing is written.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
import pytest
from export_fixtures import demo_run, folder_state, run_copy  # noqa: F401
from kernel_flavours import flavour_env
from nbclient import NotebookClient

from kernel_ext.codebuild import build
from kernel_ext.hosting.export import ExportRefused, export_run, rerun

KEYS = ("sk-no-key-required", "changeme-changeme-42")  # guessable: a placeholder, a 12+ character value
SEPARATORS = ("', '", '", "', " ", ",", "\n", '"""', "\\", "#", "\u2028", "\x85", "\u00e9")


def straddles(key: str, marker: Path) -> list[str]:
    """Values whose cut, made on code text, would leave a call to ``touch`` the marker as code."""
    code = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    half = len(key) // 2
    values = []
    for sep in SEPARATORS:
        values.append(f"a{key[:half]}{sep}{key[half:]}', {code} #{sep}tail")
        values.append(f'b{key[:half]}{sep}{key[half:]}", {code} #{sep}tail')
        values.append(f"{key}{sep}'), {code}, ('")
    return values


def plant(run_dir: Path, key: str, marker: Path) -> list[str]:
    """The hostile values in every place a runnable cell reads; returns them."""
    values = straddles(key, marker)
    internal = run_dir / ".besser"
    request = json.loads((internal / "request.json").read_text())
    request["request"] += " " + "".join(values)
    (internal / "request.json").write_text(json.dumps(request))
    recipe = json.loads((run_dir / "run.json").read_text())
    recipe["files"].update({value: "0" * 64 for value in values})
    method = recipe["model"]["form"]["classes"][1]["methods"][0]
    method["code"] = method["code"].rstrip("\n") + f"  # {key} {values[0]!r:.60}\n"
    (run_dir / "run.json").write_text(json.dumps(recipe))
    (internal / "model.py").unlink()  # the model cell is written from the form, whose method holds the key
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    done = json.loads(lines[-1])
    planted = [json.dumps({"seq": done["seq"] + i, "run_id": done["run_id"], "ts": done["ts"], "type": "approval_resolved",
                           "call_id": value, "name": "write_file", "approved": True, "by": "card"})
               for i, value in enumerate(values[:6])]
    done["seq"] += len(planted)
    (run_dir / "events.jsonl").write_text("\n".join([*lines[:-1], *planted, json.dumps(done)]) + "\n")
    turns = (internal / "turns.cassette.jsonl").read_text().split("\n")
    exchange = json.loads(turns[1])
    exchange["append"][0]["text"] += "\u2028".join(values)  # raw line separators inside one recorded line
    exchange["names"] = values  # neighbouring string items of one JSON line
    turns[1] = json.dumps(exchange, ensure_ascii=False)
    (internal / "turns.cassette.jsonl").write_text("\n".join(turns))
    return values


class _Blank(ast.NodeTransformer):
    """Constants blanked, lists and dicts of constants to empty ones: a cell's shape, data left out."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant("" if isinstance(node.value, str) else None)

    def visit_List(self, node: ast.List) -> ast.AST:
        self.generic_visit(node)
        return ast.List([], node.ctx) if all(isinstance(e, ast.Constant) for e in node.elts) else node

    def visit_Dict(self, node: ast.Dict) -> ast.AST:
        self.generic_visit(node)
        leaves = [*node.keys, *node.values]
        return ast.Dict([], []) if all(isinstance(e, ast.Constant) for e in leaves) else node


def parsed(source: str) -> ast.Module:
    return compile(source, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


def shape(source: str) -> str:
    return ast.unparse(_Blank().visit(parsed(source)))


def code_cells(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def builder_shapes(clean: list[str]) -> set[str]:
    return {shape(c) for c in clean} | {shape(build(rerun.FORM_CELL, {"form": "{}"})),
                                         shape(build(rerun.CUT_CHECK_CELL, {"digest": "0"}))}


@pytest.mark.parametrize("key", KEYS)
def test_model_chosen_values_stay_string_constants_in_every_code_cell(key, run_copy, tmp_path):
    marker = tmp_path / "outside" / "PWNED"
    clean = code_cells(export_run(run_copy, tmp_path / "clean.ipynb", known=(key,)))
    values = plant(run_copy, key, marker)
    path = export_run(run_copy, tmp_path / "hostile.ipynb", known=(key,))
    text = path.read_text()
    assert key not in text and not [w for w in {key[i:i + 12] for i in range(len(key) - 11)} if w in text]
    allowed = builder_shapes(clean)
    cells = code_cells(path)
    for source in cells:
        assert shape(source) in allowed, source[:400]  # the builder's names and calls, nothing else
        tree = parsed(source)
        called = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        assert not [c for c in called if "__import__" in c or "touch" in c]
    constants = [n.value for c in cells for n in ast.walk(parsed(c)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    carried = "\n".join(constants)
    assert all(v.split(key[len(key) // 2:], 1)[-1][:20] in carried for v in values[:3])  # the data is carried, as data
    assert shape(cells[0]) == shape(build(rerun.FORM_CELL, {"form": "{}"}))  # the model, in JSON form, cut
    assert not marker.parent.exists()


def test_a_builder_that_cuts_code_text_is_refused_and_writes_nothing(run_copy, tmp_path, monkeypatch):
    """The old way (a cut made on the code's text, values left whole) is caught by the check."""
    from kernel_ext import codebuild
    from kernel_ext.secrets import redact_text

    key = KEYS[0]
    plant(run_copy, key, tmp_path / "outside" / "PWNED")
    written = codebuild.literal
    monkeypatch.setattr(rerun, "cut", lambda value, known: value)
    monkeypatch.setattr(codebuild, "literal", lambda value: redact_text(written(value), (key,)))
    out = tmp_path / "handin"
    out.mkdir()
    with pytest.raises(ExportRefused, match="CODE_NOT_BUILT") as refused:
        export_run(run_copy, out, known=(key,))
    assert "\n" not in str(refused.value) and list(out.iterdir()) == []


@pytest.mark.slow
async def test_the_hostile_export_runs_and_creates_nothing_outside_its_folder(run_copy, tmp_path, monkeypatch):
    key = KEYS[0]
    marker = tmp_path / "outside" / "PWNED"
    plant(run_copy, key, marker)
    handin = tmp_path / "handin"
    handin.mkdir()
    notebook = nbformat.read(export_run(run_copy, handin, known=(key,)), as_version=4)
    for name in ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    before = {k: v for k, v in folder_state(tmp_path).items() if not k.startswith("handin")}
    client = NotebookClient(notebook, kernel_name="python3", timeout=600, allow_errors=True,
                            resources={"metadata": {"path": str(handin)}})
    await client.async_execute(env=flavour_env("ipykernel7"))
    after = {k: v for k, v in folder_state(tmp_path).items() if not k.startswith("handin")}
    assert after == before and not marker.exists()
    assert not [p for p in handin.rglob("*") if "PWNED" in p.name]
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    assert "recorded provider turns" in printed and "files regenerated" in printed  # the cells did run
