"""The class diagram's labels keep off other edges' lines, notes carry the OCL invariants, and no
empty band sits above the enumerations (issue 31, item 14), measured over several models: the
Library example, notebook 01's model, the evaluation's shop (JSON), clinic (PlantUML, with
inheritance and an enumeration) and blog (B-UML Python), and synthetic models of 30 and 60 classes.

The measure: for each label, whether a line of another edge passes through its plate (the
placer records each label with the edge it belongs to; every edge's line is known before any
label is placed). It is compared with the same drawing when labels ignore lines (the placer's
line search switched off), so the test shows the measure falls where it can.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_model_diagram import notebook_model, overlap, rects

from kernel_ext.model import build_library_model, diagram, labels, render_svg, synthetic_model
from kernel_ext.model.layout import ENUM_GAP_Y, GAP_Y, layout

DATA = Path(__file__).resolve().parent.parent / "kernel_ext" / "eval" / "data"
MODELS = {
    "library": build_library_model,
    "notebook-01": lambda: notebook_model(True),
    "shop-json": lambda: str(DATA / "shop.json"),
    "clinic-plantuml": lambda: str(DATA / "clinic.plantuml"),
    "blog-buml": lambda: str(DATA / "blog.py"),
    "synthetic-30": lambda: synthetic_model(30),
    "synthetic-60": lambda: synthetic_model(60),
}


def crossed_labels(model, monkeypatch, avoid_lines: bool = True) -> tuple[int, int]:
    """(labels a foreign line crosses, labels) in a fresh drawing of ``model``."""
    seen: list[tuple[object, labels.Rect, list]] = []

    class Recording(labels.LabelPlacer):
        def free(self, rect, owner=None, lines=False):
            return super().free(rect, owner, lines and avoid_lines)

        def place(self, text, wanted, owner=None):
            x, y = super().place(text, wanted, owner)
            seen.append((owner, labels.label_rect(x, y, text), self.lines))
            return x, y

    monkeypatch.setattr(diagram, "LabelPlacer", Recording)
    diagram.forget_layouts()
    render_svg(model)
    crossed = sum(any(who != owner and labels.crosses(rect, seg) for who, seg in lines) for owner, rect, lines in seen)
    return crossed, len(seen)


@pytest.mark.parametrize("which", list(MODELS))
def test_labels_keep_off_other_edges_lines(which, monkeypatch):
    model = MODELS[which]()
    before, count = crossed_labels(model, monkeypatch, avoid_lines=False)
    after, again = crossed_labels(model, monkeypatch)
    print(f"{which}: {count} labels; crossed by another edge's line: {before} when lines are ignored, {after} now")
    assert count == again and count > 0
    assert after <= before
    assert after * 4 <= before or after == 0, (which, before, after)  # measured 35 -> 4 (30 classes), 79 -> 12 (60 classes)
    assert after <= count // 10, (which, after, count)  # where no spot nearby is free of lines, a label sits on one
    if which in ("library", "notebook-01", "shop-json", "clinic-plantuml", "blog-buml"):
        assert after == 0, which  # a model of the size a class draws: every label off every other line


def test_the_library_labels_crossed_before_and_none_now(monkeypatch):
    """The issue's picture: the Author-Person generalisation ran through the Borrows labels."""
    before, _ = crossed_labels(build_library_model(), monkeypatch, avoid_lines=False)
    after, _ = crossed_labels(build_library_model(), monkeypatch)
    assert before > 0 and after == 0


@pytest.mark.parametrize("which", list(MODELS))
def test_notes_and_labels_cover_no_box_and_each_other(which):
    diagram.forget_layouts()
    svg = render_svg(MODELS[which]())
    plates = rects(svg, "label") + [(*note[:4], "note") for note in _notes(svg)]
    boxes = rects(svg, "class")
    for i, plate in enumerate(plates):
        assert not any(overlap(plate, other) for other in plates[i + 1:]), plate
        assert not any(overlap(plate, box) for box in boxes), plate


def _notes(svg: str) -> list[tuple[float, float, float, float]]:
    import xml.etree.ElementTree as ET

    out = []
    for group in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}g"):
        if group.get("class") == "note":
            points = [tuple(map(float, p.split(","))) for p in group.find("{http://www.w3.org/2000/svg}polygon").get("points").split()]
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            out.append((min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)))
    return out


def test_an_invariant_is_a_note_joined_to_its_class():
    diagram.forget_layouts()
    svg = render_svg(build_library_model())
    assert 'class="note" data-context="Book"' in svg and "inv pages_positive: self.pages &gt; 0" in svg
    assert svg.count('class="uml-note-link"') == 1 and 'stroke-dasharray="4 3"' in svg


def test_no_empty_band_above_the_enumerations():
    from kernel_ext.model.service import model_index

    plan = layout(model_index(build_library_model()))
    genre = plan.boxes["Genre"]
    above = max(b.y + b.h for b in plan.boxes.values() if b.y < genre.y)
    assert genre.y - above == ENUM_GAP_Y < GAP_Y


@pytest.mark.parametrize("which", [*MODELS, "synthetic-12"])
def test_rows_are_ordered_for_fewer_crossings(which, monkeypatch):
    """Each short row is tried in every order; the layout never has more crossings than the barycentre
    order it starts from, and fewer where the order mattered (measured: shop 4 -> 0, synthetic-12 21 -> 9;
    the library's one crossing is K2,2's, which no order of two rows avoids)."""
    from kernel_ext.model import layout as plan_of
    from kernel_ext.model.service import model_index

    index = model_index(synthetic_model(12) if which == "synthetic-12" else _loaded(MODELS[which]()))
    found = plan_of.crossings(layout(index).boxes, plan_of._edges(index))
    monkeypatch.setattr(plan_of, "CROSSING_BOXES", 0)
    before = plan_of.crossings(layout(index).boxes, plan_of._edges(index))
    print(f"{which}: {before} crossings in barycentre order, {found} now")
    assert found <= before
    if which in ("shop-json", "synthetic-12"):
        assert found < before


def _loaded(model):
    from kernel_ext.model.loading import load

    return load(model, check=False) if isinstance(model, str) else model
