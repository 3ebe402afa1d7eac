"""Loading a model in every form, round trips, and the named errors (real BESSER)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from model_fixtures import cli, write_python_model

from kernel_ext.errors import ToolFailure
from kernel_ext.model import build_library_model, load, load_model, model_digest, model_from_dict, model_to_dict
from kernel_ext.model.examples import LIBRARY_PLANTUML
from kernel_ext.model.jsonform import dumps, loads


def canonical(model) -> dict:
    return model_to_dict(model)


def refused(code: str, source, **kwargs) -> ToolFailure:
    with pytest.raises(ToolFailure) as info:
        load(source, **kwargs)
    assert info.value.code == code, info.value.message
    return info.value


def test_domain_model_object_loads_checked():
    model = build_library_model()
    loaded = load(model)
    assert loaded.model is model and loaded.kind == "object" and loaded.warnings == ()
    assert {c.name for c in model.get_classes()} == {"Library", "Book", "Author", "Member", "Person"}


def test_python_file_round_trip_equals_the_builder(tmp_path):
    path = write_python_model(build_library_model(), tmp_path / "library.py")
    loaded = load(path)
    assert loaded.kind == "python"
    assert canonical(loaded.model) == canonical(build_library_model())
    assert model_digest(loaded.model) == model_digest(build_library_model())


def test_json_round_trip_is_exact(tmp_path):
    model = build_library_model()
    data = model_to_dict(model)
    again = model_from_dict(json.loads(json.dumps(data)))
    assert model_to_dict(again) == data
    assert again.validate(raise_exception=False)["success"]
    (tmp_path / "library.json").write_text(dumps(model))
    assert canonical(load_model(tmp_path / "library.json")) == data


def test_plantuml_file_through_besser_grammar_round_trips():
    loaded = load(LIBRARY_PLANTUML)
    assert loaded.kind == "plantuml" and loaded.model.name == "Library"
    data = canonical(loaded.model)
    assert canonical(loads(json.dumps(data))) == data
    # What PlantUML can express matches the Python builder (BESSER names association ends
    # after their classes and has no method bodies, so those are compared apart).
    reference = canonical(build_library_model())
    for key in ("enumerations", "generalizations", "constraints"):
        assert data[key] == reference[key]

    def shape(d):
        return {
            c["name"]: ({(a["name"], a["type"]) for a in c["attributes"]}, {m["name"] for m in c["methods"]}, c.get("is_abstract", False))
            for c in d["classes"]
        }

    assert shape(data) == shape(reference)
    ends = {a["name"]: sorted((e["type"], e["multiplicity"]) for e in a["ends"]) for a in data["associations"]}
    ref_ends = {a["name"]: sorted((e["type"], e["multiplicity"]) for e in a["ends"]) for a in reference["associations"]}
    assert ends == ref_ends


def test_example_prefix():
    assert canonical(load_model("example:library")) == canonical(build_library_model())
    refused("not_found", "example:nope")


def test_python_loader_never_executes_other_code(tmp_path):
    marker = tmp_path / "PWNED"
    path = write_python_model(build_library_model(), tmp_path / "model.py")
    path.write_text(
        path.read_text()
        + "\nimport os\nfrom besser.generators.backend import BackendGenerator\n"
        + "gen = BackendGenerator(model=domain_model, output_dir='out')\ngen.generate()\n"
        + f"os.system('touch {marker}')\n"
        + "from os import system as Class\n"
        + f"if __name__ == '__main__':\n    open({str(marker)!r}, 'w')\n"
    )
    loaded = load(path)
    assert canonical(loaded.model) == canonical(build_library_model())
    assert not marker.exists() and not (tmp_path / "out").exists()
    assert any("import of 'os'" in note for note in loaded.notes)
    assert any("import of 'system' from 'os'" in note for note in loaded.notes)  # a renamed import is listed too
    assert any("__main__" in note for note in loaded.notes)


@pytest.mark.parametrize(
    "source",
    [
        "from besser.BUML.metamodel.structural import *\nfor i in range(3):\n    pass\n",
        "x = (lambda: 1)()\n",
        "from besser.BUML.metamodel.structural import Class\nClass.__subclasses__()\n",
        "import builtins\nm = DomainModel(name='M', types={Class(name='A')})\nm.validate.__globals__\n",
        "m = DomainModel(name='M', types={Class(name='A')})\nm.name.__class__\n",
        "[].append(1)\n",
    ],
)
def test_python_constructs_outside_the_subset_are_refused(tmp_path, source):
    path = tmp_path / "model.py"
    path.write_text(source)
    error = refused("unsafe_model_source", path)
    assert "line" in error.message


def test_not_a_model_errors_name_the_problem(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("just some words\n")
    assert "cannot tell" in refused("not_a_model", text).message
    puml = tmp_path / "broken.plantuml"
    puml.write_text("@startuml\nclass { oops\n@enduml\n")
    assert "line 2" in refused("not_a_model", puml).message
    no_model = tmp_path / "empty.py"
    no_model.write_text("x = 1\n")
    assert "no DomainModel" in refused("not_a_model", no_model).message
    bad_py = tmp_path / "bad.py"
    bad_py.write_text("def broken(:\n")
    assert "not valid Python" in refused("not_a_model", bad_py).message
    other_json = tmp_path / "other.json"
    other_json.write_text('{"elements": []}')
    assert "format" in refused("not_a_model", other_json).message
    assert "not a B-UML DomainModel" in refused("not_a_model", {"classes": []}).message
    refused("not_found", tmp_path / "missing.py")


def test_empty_model_is_named():
    from besser.BUML.metamodel.structural import DomainModel

    error = refused("empty_model", DomainModel(name="Nothing"))
    assert "Nothing" in error.message and "no classes" in error.message


def test_invalid_model_lists_besser_validation_errors():
    from besser.BUML.metamodel.structural import Class, DomainModel, Generalization

    a, b = Class(name="A"), Class(name="Outside")
    model = DomainModel(name="Broken", types={a}, generalizations={Generalization(general=b, specific=a)})
    error = refused("invalid_model", model)
    assert "Outside" in error.message and error.data["errors"]


def test_invalid_references_in_plantuml_and_json(tmp_path):
    puml = tmp_path / "m.puml"
    puml.write_text("@startuml\nclass A {\n + x: Nope\n}\n@enduml\n")
    assert "x" in refused("invalid_model", puml).message
    puml.write_text("@startuml\nclass A {\n + x: int\n}\n' OCL: context Missing inv: self.x > 0\n@enduml\n")
    assert "Missing" in refused("invalid_model", puml).message
    data = model_to_dict(build_library_model())
    data["classes"][0]["attributes"][0]["type"] = "Ghost"
    (tmp_path / "m.json").write_text(json.dumps(data))
    assert "Ghost" in refused("invalid_model", tmp_path / "m.json").message


def test_importing_the_model_package_does_not_import_besser():
    code = "import sys, kernel_ext.model, kernel_ext.generation; print(any(m.startswith('besser') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "False"


@pytest.mark.parametrize("form", ["plantuml", "python"])
def test_tool_cli_with_a_model_file(tmp_path, form):
    model_file = LIBRARY_PLANTUML if form == "plantuml" else write_python_model(build_library_model(), tmp_path / "lib.py")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    proc = cli("tool", "--workspace", str(workspace), "--model", str(model_file), "query_class", '{"name": "Book"}')
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] is True
    assert result["observation"].startswith("class Book") and "pages_positive" in result["observation"]


def test_tool_cli_refuses_a_bad_model_file(tmp_path):
    bad = tmp_path / "bad.puml"
    bad.write_text("@startuml\nclass {\n@enduml\n")
    proc = cli("tool", "--workspace", str(tmp_path), "--model", str(bad), "query_class", '{"name": "Book"}')
    assert proc.returncode == 2 and "not_a_model" in proc.stderr
