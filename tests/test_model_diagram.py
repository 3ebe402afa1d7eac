"""The class diagram: a well-formed SVG drawn in Python, escaped, with a text fallback."""

from __future__ import annotations

import re
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
    assert set(bundle) == {"text/html", "image/svg+xml", "text/plain"}
    assert bundle["image/svg+xml"].startswith("<svg") and bundle["text/html"].endswith(bundle["image/svg+xml"] + "</div>")
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


# -- a picture a person keeps: boxes stay put when a class is added, labels cover nothing --------


def notebook_model(with_member: bool):
    """Notebook 01's Library model, built by its own cells (the magic lines left out)."""
    import json
    from pathlib import Path

    notebook = json.loads((Path(__file__).parent.parent / "notebooks" / "01-library-prototyping.ipynb").read_text())
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    namespace: dict = {}
    for source in (cells[1], cells[3]) if with_member else (cells[1],):
        exec("\n".join(line for line in source.splitlines() if not line.startswith("%")), namespace)  # noqa: S102 - the repository's own notebook
    return namespace["library"]


def rects(svg: str, kind: str) -> list[tuple[float, float, float, float, str]]:
    root = ET.fromstring(svg)
    out = []
    for group in root.iter(f"{SVG}g"):
        if group.get("class") == kind:
            rect = group.find(f"{SVG}rect")
            label = group.get("data-name") or "".join(t.text or "" for t in group.iter(f"{SVG}text"))
            out.append((float(rect.get("x")), float(rect.get("y")), float(rect.get("width")), float(rect.get("height")), label))
    return out


def overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def test_adding_a_class_moves_no_existing_box():
    from kernel_ext.model.diagram import forget_layouts
    from kernel_ext.model.index import build_index
    from kernel_ext.model.layout import layout

    before = layout(build_index(notebook_model(False)))
    after = layout(build_index(notebook_model(True)), keep=before)
    assert "Member" in after.boxes and set(before.boxes) < set(after.boxes)
    for name, box in before.boxes.items():
        assert (after.boxes[name].x, after.boxes[name].y) == (box.x, box.y), name
    fresh = layout(build_index(notebook_model(True)))
    assert any((fresh.boxes[n].x, fresh.boxes[n].y) != (b.x, b.y) for n, b in before.boxes.items())  # the old behaviour moved some
    # the notebook's path: %besser show twice in one kernel
    forget_layouts()
    first = {r[4]: r[:2] for r in rects(show(notebook_model(False)).svg, "class")}
    second = {r[4]: r[:2] for r in rects(show(notebook_model(True)).svg, "class")}
    assert all(second[name] == place for name, place in first.items()) and "Member" in second
    boxes = list(rects(show(notebook_model(True)).svg, "class"))
    assert not any(overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_classes_added_one_by_one_keep_every_box_and_never_overlap():
    from besser.BUML.metamodel.structural import BinaryAssociation, Class, Multiplicity, Property, StringType

    from kernel_ext.model.index import build_index
    from kernel_ext.model.layout import layout

    model = synthetic_model(12)
    plan = layout(build_index(model))
    classes = sorted(model.get_classes(), key=lambda c: c.name)
    for n in range(6):
        new = Class(name=f"Added{n}", attributes={Property(name="label", type=StringType)})
        model.add_type(new)
        model.add_association(BinaryAssociation(name=f"Link{n}", ends={
            Property(name=f"owner{n}", type=classes[n * 2], multiplicity=Multiplicity(0, 1)),
            Property(name=f"added{n}", type=new, multiplicity=Multiplicity(0, "*"))}))
        following = layout(build_index(model), keep=plan)
        for name, box in plan.boxes.items():
            assert (following.boxes[name].x, following.boxes[name].y) == (box.x, box.y), (n, name)
        boxes = [(b.x, b.y, b.w, b.h) for b in following.boxes.values()]
        assert not any(overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), n
        plan = following


@pytest.mark.parametrize("which", ["library", "notebook-01", "synthetic-30", "synthetic-60"])
def test_no_label_overlaps_another_label_or_a_box(which):
    from kernel_ext.model.diagram import forget_layouts

    forget_layouts()
    model = {"library": build_library_model, "notebook-01": lambda: notebook_model(True),
             "synthetic-30": lambda: synthetic_model(30), "synthetic-60": lambda: synthetic_model(60)}[which]()
    svg = render_svg(model)
    labels, boxes = rects(svg, "label"), rects(svg, "class")
    assert labels and boxes
    for i, label in enumerate(labels):
        for other in labels[i + 1:]:
            assert not overlap(label, other), (label[4], other[4])
        for box in boxes:
            assert not overlap(label, box), (label[4], box[4])
    root = ET.fromstring(svg)
    width, height = float(root.get("width")), float(root.get("height"))
    assert all(0 <= x and x + w <= width and 0 <= y and y + h <= height for x, y, w, h, _ in labels)


def test_the_diagram_follows_the_theme():
    svg = render_svg(build_library_model())
    style = ET.fromstring(svg).find(f"{SVG}style").text
    assert "var(--jp-layout-color0" in style and "var(--jp-ui-font-color1" in style
    for colour in re.findall(r"(?:fill|stroke):([^;}]+)", style):
        assert colour.startswith("var(--jp-"), colour
