"""``model/names.py``: which names can be pasted into generated code, and how a refusal reads."""

from __future__ import annotations

import pytest

from kernel_ext.errors import ToolFailure
from kernel_ext.model.examples import LIBRARY_PLANTUML, build_library_model, synthetic_model
from kernel_ext.model.loading import load
from kernel_ext.model.names import MAX_NAME_CHARS, check_names, identifier_problem


@pytest.mark.parametrize("name", ["Book", "title", "is_long", "B2", "match", "case", "type", "x" * MAX_NAME_CHARS])
def test_plain_identifiers_and_soft_keywords_pass(name):
    assert identifier_problem(name) is None


@pytest.mark.parametrize(("name", "why"), [
    ("", "empty"), ("a\nb", "U+000A"), ("a\tb", "U+0009"), ("a\u200bb", "U+200B"), ("a\u2028b", "U+2028"),
    ("class", "keyword"), ("None", "keyword"), ("9lives", "starts with a digit"), ("_x", "starts with '_'"),
    ("__init__", "starts with '_'"), ('a"b', "other than letters"), ("a.b", "other than letters"),
    ("caf\u00e9", "non-ASCII"), ("\uff21", "non-ASCII"), ("x" * (MAX_NAME_CHARS + 1), "characters long"), (None, "not text"),
])
def test_everything_else_is_refused_with_a_reason(name, why):
    assert why in identifier_problem(name)


def test_the_shipped_models_pass():
    for model in (build_library_model(), synthetic_model(60), load(LIBRARY_PLANTUML).model):
        check_names(model)


def test_a_refusal_is_one_line_naming_the_element_and_the_fix():
    from besser.BUML.metamodel.structural import Method, Parameter, StringType

    model = build_library_model()
    model.get_class_by_name("Book").add_method(Method(name="go", parameters=[Parameter(name="la\x1bmbda", type=StringType)]))
    with pytest.raises(ToolFailure) as refused:
        check_names(model, origin="course.json")
    message = refused.value.message
    assert refused.value.code == "invalid_name" and "\n" not in message and "\x1b" not in message
    assert message.startswith("course.json: parameter of method Book.go 'la\\x1bmbda': the name contains the control character U+001B")
    assert "rename it to a Python identifier" in message
    assert refused.value.data["problems"] == [message.removeprefix("course.json: ")]


def test_a_plantuml_file_name_always_makes_an_identifier(tmp_path):
    for stem in ("2024 course", "caf\u00e9-model", "class", "___"):
        path = tmp_path / f"{stem}.plantuml"
        path.write_text("@startuml\nclass Book {\n  +title: str\n}\n@enduml\n")
        check_names(load(path).model)
