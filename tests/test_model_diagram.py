"""The class diagram: a well-formed SVG drawn in Python, escaped, with a text fallback."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from kernel_ext.model import ClassDiagram, build_library_model, render_svg, render_text, show, synthetic_model

SVG = "{http://www.w3.org/2000/svg}"


def texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [el.text or "" for el in root.iter(f"{SVG}text")]


def test_library_diagram_has_every_class_edge_and_label():
    diagram = show(build_library_model())
    root = ET.fromstring(diagram.svg)
    assert root.tag == f"{SVG}svg" and float(root.get("width")) > 0
    groups = {g.get("data-name") for g in root.iter(f"{SVG}g") if g.get("class") == "class"}
    assert groups == {"Library", "Book", "Author", "Member", "Person", "Genre"}
    words = texts(diagram.svg)
    for expected in ("\u00ababstract\u00bb", "\u00abenumeration\u00bb", "pages: int", "is_long(threshold: int): bool",
                     "Writes", "Borrows", "Stocks", "authors 1..*", "FICTION"):
        assert expected in words, expected
    kinds = [el.get("class") for el in root.iter() if el.get("class") in ("generalization", "association")]
    assert kinds.count("generalization") == 2 and kinds.count("association") == 3


def test_notebook_bundle_has_svg_and_text_fallback():
    bundle = ClassDiagram(build_library_model())._repr_mimebundle_()
    assert set(bundle) == {"image/svg+xml", "text/plain"}
    assert bundle["image/svg+xml"].startswith("<svg")
    text = bundle["text/plain"]
    assert "class Author extends Person" in text and "Writes: Author [1..*] authors -- books [0..*] Book" in text
    assert "OCL pages_positive" in text


def test_show_accepts_a_model_file_or_example():
    from kernel_ext.model.examples import LIBRARY_PLANTUML

    assert "class Author extends Person" in show(LIBRARY_PLANTUML).text
    assert ET.fromstring(show("example:library").svg).get("width")


def test_markup_in_names_and_defaults_is_escaped():
    from besser.BUML.metamodel.structural import Class, DomainModel, Method, Parameter, StringType

    cls = Class(name="Tag")
    cls.add_method(Method(name="render", parameters=[Parameter(name="tpl", type=StringType, default_value="<b>&</b>")], type=StringType))
    svg = render_svg(DomainModel(name="M&<x>", types={cls}))
    ET.fromstring(svg)  # well-formed despite <, > and &
    assert "<b>" not in svg and "&lt;b&gt;" in svg
    assert any("'<b>&</b>'" in t for t in texts(svg))


def test_large_model_renders_and_boxes_do_not_overlap():
    from kernel_ext.model.index import build_index
    from kernel_ext.model.layout import layout

    model = synthetic_model(60)
    ET.fromstring(render_svg(model))
    boxes = list(layout(build_index(model)).boxes.values())
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            apart = a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
            assert apart, (a.name, b.name)
    assert render_text(model).startswith("Model Synthetic60: 60 classes")


def test_children_are_drawn_below_their_parents():
    from kernel_ext.model.index import build_index
    from kernel_ext.model.layout import layout

    boxes = layout(build_index(build_library_model())).boxes
    assert boxes["Author"].y > boxes["Person"].y and boxes["Member"].y > boxes["Person"].y



@pytest.mark.parametrize("bad", ["\x00", "\x0b", "\x1b[31m", "\n", "\t", "\r", "\ufffe", "\ud800", "\x7f"])
@pytest.mark.parametrize("where", ["model", "class", "attribute", "association", "literal"])
def test_control_characters_in_names_give_well_formed_svg(bad, where):
    # Names reach the diagram before any name check (a person should see the bad name to fix it):
    # every character XML 1.0 forbids, and white space hiding in a name, is drawn as an escape.
    from besser.BUML.metamodel.structural import Property, StringType

    model = build_library_model()
    book = model.get_class_by_name("Book")
    name = f"na{bad}me"
    if where == "model":
        model.name = name
    elif where == "class":
        book.name = f"Bo{bad}ok"
    elif where == "attribute":
        book.add_attribute(Property(name=name, type=StringType))
    elif where == "association":
        next(a for a in model.associations if a.name == "Writes").name = name
    else:
        next(t for t in model.types if t.name == "Genre").add_literal(__import__(
            "besser.BUML.metamodel.structural", fromlist=["EnumerationLiteral"]).EnumerationLiteral(name=name))
    svg = render_svg(model)
    root = ET.fromstring(svg)  # well-formed
    shown = " ".join(texts(svg)) + " ".join(g.get("data-name") or "" for g in root.iter(f"{SVG}g"))
    escape = f"\\x{ord(bad[0]):02x}" if ord(bad[0]) < 0x20 or bad[0] == "\x7f" else f"\\u{ord(bad[0]):04x}"
    assert escape in shown + (root.find(f"{SVG}title").text or "")
