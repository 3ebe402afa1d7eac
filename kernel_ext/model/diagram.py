"""A class diagram of a DomainModel: an SVG drawn in Python, with a text fallback.

No web service, no JavaScript, no Graphviz: boxes are laid out in layers (parents above
their children, associated classes near each other, enumerations last), rows wrap at a
width that keeps the picture roughly square, and edges are straight lines clipped to the
box borders (hollow triangle: generalization; filled diamond: composition; role names and
multiplicities at the ends, placed where they cover no box and no other label:
``labels.py``). ``ClassDiagram`` renders itself in a notebook (``_repr_mimebundle_``: the SVG
inline as HTML, so JupyterLab's theme variables colour it; the SVG alone, whose colours fall
back to a light picture; plain text for static viewers); this is what ``%besser show`` displays.

Drawing a model again (same name) keeps every box that is still there where it was: the
layouts drawn in this process are remembered, the last ``REMEMBERED`` models' worth.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from kernel_ext.model.index import ModelIndex
from kernel_ext.model.labels import LabelPlacer, along, near_end
from kernel_ext.model.layout import ABSTRACT, ENUMERATION, GAP_Y, LINE_H, PAD, Box, Layout, border, layout, unit

REMEMBERED = 32
_drawn: OrderedDict[str, Layout] = OrderedDict()  # model name -> the layout last drawn for it


def placed(index: ModelIndex) -> Layout:
    """The model's layout, keeping the boxes of the one drawn before for the same model name."""
    plan = layout(index, keep=_drawn.get(index.name))
    _drawn[index.name] = plan
    _drawn.move_to_end(index.name)
    while len(_drawn) > REMEMBERED:
        _drawn.popitem(last=False)
    return plan


def forget_layouts() -> None:
    """Start afresh: the next drawing of every model is laid out from scratch."""
    _drawn.clear()


class ClassDiagram:
    """The picture of one model; renders as SVG in notebooks and as text elsewhere."""

    def __init__(self, model: Any):
        """``model``: a DomainModel, LoadedModel, ModelIndex, a model file path or ``example:NAME``."""
        from kernel_ext.model.loading import LoadedModel, load
        from kernel_ext.model.service import domain_model_of, model_index

        if isinstance(model, (str, os.PathLike)) and not isinstance(model, LoadedModel):
            model = load(model, check=False)
        self.index: ModelIndex = model_index(model)
        self.model = domain_model_of(model)
        self._svg: str | None = None

    @property
    def svg(self) -> str:
        if self._svg is None:
            self._svg = _svg(self.index)
        return self._svg

    @property
    def text(self) -> str:
        return _text_view(self.index)

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": f'<div class="besser-uml-diagram">{self.svg}</div>', "image/svg+xml": self.svg, "text/plain": self.text}

    def __repr__(self) -> str:
        return self.text

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(self.svg)


def show(model: Any) -> ClassDiagram:
    """``show(model)`` as the last line of a cell draws the class diagram."""
    return ClassDiagram(model)


# -- text -----------------------------------------------------------------------------------


def render_text(model: Any) -> str:
    """The plain-text picture of a model (anything ``ClassDiagram`` accepts)."""
    return ClassDiagram(model).text


def render_svg(model: Any) -> str:
    """The SVG picture of a model (anything ``ClassDiagram`` accepts)."""
    return ClassDiagram(model).svg


def _text_view(index: ModelIndex) -> str:
    lines = [f"Model {index.name}: {len(index.classes)} classes, {len(index.enumerations)} enumerations"]
    for view in index.classes.values():
        head = f"  class {view.name}" + (" {abstract}" if view.is_abstract else "")
        if view.parents:
            head += f" extends {', '.join(view.parents)}"
        lines.append(head)
        lines.extend(f"    {a.name}: {a.type}" for a in view.own_attributes)
        lines.extend(f"    {m.signature}" for m in view.own_methods)
    for name, literals in index.enumerations.items():
        lines.append(f"  enum {name} {{{', '.join(literals)}}}")
    for a, b in _associations(index):
        lines.append(f"  {a.association}: {a.declared_in} [{b.multiplicity}] {b.role} -- {a.role} [{a.multiplicity}] {a.target}")
    for c in _invariants(index):
        lines.append(f"  OCL {c.name}: {c.expression}")
    return "\n".join(lines)


def _associations(index: ModelIndex) -> list[tuple[Any, Any]]:
    """Each association once, as its two ends (seen from each side)."""
    seen: dict[str, list[Any]] = {}
    for view in index.classes.values():
        for end in view.ends:
            if end.declared_in == view.name:
                seen.setdefault(end.association, []).append(end)
    pairs = []
    for ends in seen.values():
        first = ends[0]
        other = next((e for e in ends[1:] if e.role == first.own_role), first)
        pairs.append((first, other))
    return sorted(pairs, key=lambda p: p[0].association)


def _invariants(index: ModelIndex) -> list[Any]:
    out = {}
    for view in index.classes.values():
        for c in view.constraints:
            if c.context == view.name:
                out[(c.context, c.name, c.method)] = c
    return list(out.values())


# -- svg ------------------------------------------------------------------------------------


# JupyterLab's theme colours where the SVG sits in its page; the presentation attributes (light)
# where it does not (an <img>, a converter without CSS variables).
THEME = (
    "svg.besser-uml text{fill:var(--jp-ui-font-color1,#000)}"
    "svg.besser-uml .uml-bg,svg.besser-uml .uml-plate,svg.besser-uml .uml-hollow{fill:var(--jp-layout-color0,#fff)}"
    "svg.besser-uml .uml-box{fill:var(--jp-layout-color1,#fefce8)}"
    "svg.besser-uml .uml-enum,svg.besser-uml .uml-note{fill:var(--jp-layout-color2,#f4f8e8)}"
    "svg.besser-uml .uml-box,svg.besser-uml .uml-enum,svg.besser-uml .uml-line,svg.besser-uml .uml-hollow,"
    "svg.besser-uml .association,svg.besser-uml .generalization,svg.besser-uml .uml-note,svg.besser-uml .uml-note-link"
    "{stroke:var(--jp-ui-font-color2,#444)}"
    "svg.besser-uml .uml-solid{fill:var(--jp-ui-font-color2,#444)}svg.besser-uml text.uml-name{fill:var(--jp-brand-color1,#225)}"
)


def _svg(index: ModelIndex) -> str:
    plan = placed(index)
    lines, labels, (right, bottom) = _edges(index, plan)
    width, height = max(plan.width, right + 4), max(plan.height, bottom + 4)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="besser-uml" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" '
        f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="12">',
        f"<title>{escape(xml_text(f'Class diagram of {index.name}'))}</title>",
        f"<style>{THEME}</style>",
        f'<rect class="uml-bg" x="0" y="0" width="{width:.0f}" height="{height:.0f}" fill="white"/>',
    ]
    out.extend(lines)
    for box in plan.boxes.values():
        out.extend(_box_svg(box))
    out.extend(labels)  # on top of boxes, on a plate of the background colour
    out.append("</svg>")
    return "\n".join(out)


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 forbids (and tab, newline, carriage return, which
    a name should not hide as white space) shown as a visible escape, so the SVG stays well-formed."""
    return "".join(f"\\x{ord(ch):02x}" if ord(ch) < 0x20 or ord(ch) == 0x7F
                   else f"\\u{ord(ch):04x}" if 0xD800 <= ord(ch) <= 0xDFFF or ch in "\ufffe\uffff" else ch
                   for ch in str(text))


def _text(x: float, y: float, text: str, **attrs: str) -> str:
    extra = "".join(f" {k.rstrip('_').replace('_', '-')}={quoteattr(xml_text(v))}" for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(xml_text(text))}</text>'


def _label(placer: LabelPlacer, wanted: list[tuple[float, float]], text: str, owner: object = None, **attrs: str) -> str:
    """Small centred text on a plate, at the first of ``wanted`` that covers no box or label (nor, where it can,
    another edge's line than ``owner``'s)."""
    x, y = placer.place(text, wanted, owner)
    w = len(text) * 6.0 + 4
    return (
        f'<g class="label"><rect class="uml-plate" x="{x - w / 2:.1f}" y="{y - 9:.1f}" width="{w:.1f}" height="12" fill="white" '
        f'fill-opacity="0.85"/>{_text(x, y, text, text_anchor="middle", font_size="10", **attrs)}</g>'
    )


def _box_svg(box: Box) -> list[str]:
    fill, kind = ("#f4f8e8", "uml-enum") if box.stereotype == ENUMERATION else ("#fefce8", "uml-box")
    parts = [
        f'<g class="class" data-name={quoteattr(xml_text(box.name))}>',
        f'<rect class="{kind}" x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
        f'fill="{fill}" stroke="#444" rx="3"/>',
    ]
    y = box.y + 17
    if box.stereotype:
        parts.append(_text(box.cx, y - 3, box.stereotype, text_anchor="middle", font_size="10"))
        y += LINE_H - 2
    style = {"font_style": "italic"} if box.stereotype == ABSTRACT else {}
    parts.append(_text(box.cx, y, box.name, text_anchor="middle", font_weight="bold", **style))
    y = box.y + box.head
    for rows in box.sections:
        parts.append(f'<line class="uml-line" x1="{box.x:.1f}" y1="{y:.1f}" x2="{box.x + box.w:.1f}" y2="{y:.1f}" stroke="#444"/>')
        for i, row in enumerate(rows):
            parts.append(_text(box.x + PAD, y + LINE_H * (i + 1) - 2, row))
        y += max(1, len(rows)) * LINE_H + PAD
    parts.append("</g>")
    return parts


def _edges(index: ModelIndex, plan: Layout) -> tuple[list[str], list[str], tuple[float, float]]:
    lines: list[str] = []
    labels: list[str] = []
    boxes = plan.boxes
    inherits = [(boxes[v.name], boxes[p]) for v in index.classes.values() for p in v.parents if p in boxes]
    associations = [(a, b) for a, b in _associations(index) if a.declared_in in boxes and a.target in boxes]
    drawn = [(("is-a", c.name, p.name), _ends(c, p)) for c, p in inherits]  # every line, before any label
    for a, _b in associations:
        drawn.extend((a.association, seg) for seg in _segments(plan, boxes[a.declared_in], boxes[a.target]))
    placer = LabelPlacer(boxes.values(), drawn)
    for child, parent in inherits:
        lines.extend(_generalization(child, parent))
    for a, b in associations:
        _association(plan, boxes[a.declared_in], boxes[a.target], a, b, lines, labels, placer)
    for context, constraints in _invariants_by_class(index).items():
        if context in boxes:
            lines_, note = _note(boxes[context], constraints, placer)
            lines.extend(lines_)
            labels.append(note)
    return lines, labels, placer.extent()


def _ends(near: Box, far: Box) -> tuple[float, float, float, float]:
    """The straight line between two boxes, clipped to their borders."""
    x1, y1 = border(near, far.cx, far.cy)
    x2, y2 = border(far, near.cx, near.cy)
    return x1, y1, x2, y2


def _arc(plan: Layout, near: Box, far: Box) -> tuple[Box, float, float, float, float] | None:
    """(left box, x1, x2, y, lift) of the arc above a band joining two boxes of it with others between; else None."""
    if not (abs(near.y - far.y) < 1 and plan.between(near, far)):
        return None
    left, right = (near, far) if near.x < far.x else (far, near)
    return left, left.cx + left.w / 4, right.cx - right.w / 4, left.y, min(GAP_Y - 10, 30 + 4 * abs(near.column - far.column))


def _segments(plan: Layout, near: Box, far: Box) -> list[tuple[float, float, float, float]]:
    """The straight pieces an association's line is drawn along (a curve by the polygon around it)."""
    if near is far:
        x, y = near.x + near.w, near.cy
        return [(x, y - 12, x + 28, y - 12), (x + 28, y - 12, x + 28, y + 12), (x + 28, y + 12, x, y + 12)]
    arc = _arc(plan, near, far)
    if arc is None:
        return [_ends(near, far)]
    _left, x1, x2, y, lift = arc
    return [(x1, y, x1, y - lift), (x1, y - lift, x2, y - lift), (x2, y - lift, x2, y)]


def _generalization(child: Box, parent: Box) -> list[str]:
    x1, y1, x2, y2 = _ends(child, parent)
    ux, uy = unit(x1 - x2, y1 - y2)
    bx, by = x2 + ux * 14, y2 + uy * 14
    return [
        f'<line class="generalization" x1="{x1:.1f}" y1="{y1:.1f}" x2="{bx:.1f}" y2="{by:.1f}" stroke="#444"/>',
        f'<polygon class="uml-hollow" points="{x2:.1f},{y2:.1f} {bx - uy * 8:.1f},{by + ux * 8:.1f} {bx + uy * 8:.1f},{by - ux * 8:.1f}" '
        'fill="white" stroke="#444"/>',
    ]


def _association(plan: Layout, near: Box, far: Box, a: Any, b: Any, lines: list[str], labels: list[str],
                 placer: LabelPlacer) -> None:
    """``a`` is the end seen from ``near`` (its role points at ``far``); ``b`` the opposite one."""
    own_role = b.role if b is not a else a.own_role

    def own(wanted: list[tuple[float, float]], text: str, **attrs: str) -> str:
        return _label(placer, wanted, text, a.association, **attrs)

    far_text, near_text = f"{a.role} {_short(a.multiplicity)}", f"{own_role} {_short(a.own_multiplicity)}"
    if near is far:  # a self-association: a loop on the right side
        x, y = near.x + near.w, near.cy
        lines.append(f'<path class="association" d="M {x:.1f} {y - 12:.1f} h 28 v 24 h -28" fill="none" stroke="#444"/>')
        text = f"{a.association}: {a.role} {_short(a.multiplicity)}"
        half = len(text) * 3.0
        labels.append(own([(x + 32 + half, y - 16), (x + 32 + half, y + 24), (x + 32 + half, y + 4)], text))
        return
    arc = _arc(plan, near, far)
    if arc is not None:  # same band, boxes in between: arc through the free band above it
        left, x1, x2, y, lift = arc
        lines.append(
            f'<path class="association" d="M {x1:.1f} {y:.1f} C {x1:.1f} {y - lift * 1.33:.1f} '
            f'{x2:.1f} {y - lift * 1.33:.1f} {x2:.1f} {y:.1f}" fill="none" stroke="#444"/>'
        )
        middle = (x1 + x2) / 2
        labels.append(own([(middle, y - lift + 4), (middle, y - lift - 10), (middle, y - lift + 18)], a.association,
                             class_="uml-name", fill="#225"))
        nx, fx = (x1, x2) if near is left else (x2, x1)
        for at, text in ((fx, far_text), (nx, near_text)):
            labels.append(own([(at, y - 6), (at, y - 20), (at + 30, y - 6), (at - 30, y - 6)], text))
        return
    x1, y1, x2, y2 = _ends(near, far)
    ux, uy = unit(x2 - x1, y2 - y1)
    lines.append(f'<line class="association" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#444"/>')
    for (ex, ey, sign), whole in (((x1, y1, 1), a.owns), ((x2, y2, -1), a.part_of)):
        if whole:  # a filled diamond at the whole's end
            mx, my = ex + ux * 9 * sign, ey + uy * 9 * sign
            bx, by = ex + ux * 18 * sign, ey + uy * 18 * sign
            lines.append(
                f'<polygon class="uml-solid" points="{ex:.1f},{ey:.1f} {mx - uy * 5:.1f},{my + ux * 5:.1f} {bx:.1f},{by:.1f} '
                f'{mx + uy * 5:.1f},{my - ux * 5:.1f}" fill="#444"/>'
            )
    labels.append(own(near_end(x2, y2, -ux, -uy, far_text), far_text))
    labels.append(own(near_end(x1, y1, ux, uy, near_text), near_text))
    labels.append(own(along(x1, y1, x2, y2, (0.5, 0.4, 0.6, 0.3, 0.7), (9, -9, 20, -20)), a.association,
                         class_="uml-name", fill="#225"))


NOTE_CHARS = 48  # a note's line is cut there (the text view and the model keep the whole invariant)
NOTE_LINE = 14.0


def _invariants_by_class(index: ModelIndex) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for constraint in _invariants(index):
        out.setdefault(constraint.context, []).append(constraint)
    return out


def _note_lines(constraints: list[Any]) -> list[str]:
    """One line per invariant, ``inv NAME: BODY`` (the body after its ``context ... inv NAME:`` head), cut with an ellipsis."""
    lines = []
    for c in constraints:
        expression = str(c.expression)
        head, colon, rest = expression.partition(":")
        body = rest.strip() if colon and " inv " in f" {head} " else expression
        text = f"inv {c.name}: {body}"
        lines.append(text if len(text) <= NOTE_CHARS else text[: NOTE_CHARS - 1] + "\u2026")
    return lines


def _note(box: Box, constraints: list[Any], placer: LabelPlacer) -> tuple[list[str], str]:
    """A UML note (folded corner) holding a class's OCL invariants, beside the class and joined to it by a dashed line."""
    rows = _note_lines(constraints)
    w, h = max(len(r) for r in rows) * 6.0 + 16, len(rows) * NOTE_LINE + 10
    gap = 24.0
    wanted = [(box.x + box.w + gap, box.y), (box.x - gap - w, box.y), (box.x, box.y + box.h + gap), (box.x, box.y - gap - h)]
    x, y = placer.place_rect(w, h, wanted)
    cx, cy = x + w / 2, y + h / 2
    bx, by = border(box, cx, cy)
    note_box = Box("", "", [], x, y, w, h)
    nx, ny = border(note_box, bx, by)
    link = (f'<line class="uml-note-link" x1="{bx:.1f}" y1="{by:.1f}" x2="{nx:.1f}" y2="{ny:.1f}" stroke="#444" '
            'stroke-dasharray="4 3"/>')
    fold = 8.0
    parts = [f'<g class="note" data-context={quoteattr(xml_text(box.name))}>',
             f'<polygon class="uml-note" points="{x:.1f},{y:.1f} {x + w - fold:.1f},{y:.1f} {x + w:.1f},{y + fold:.1f} '
             f'{x + w:.1f},{y + h:.1f} {x:.1f},{y + h:.1f}" fill="#fff8dc" stroke="#444"/>']
    parts.extend(_text(x + 8, y + 5 + NOTE_LINE * (i + 1) - 3, row, font_size="10") for i, row in enumerate(rows))
    parts.append("</g>")
    return [link], "".join(parts)


def _short(mult: str) -> str:
    low, _, high = mult.partition("..")
    return low if low == high else ("*" if (low, high) == ("0", "*") else mult)
