"""Where each box of the class diagram goes (``diagram.py`` draws them).

Layers follow inheritance (a class sits one layer below its lowest parent). The first layer
is ordered by a breadth-first walk from the most connected class, so associated classes end
up side by side; each later layer is ordered by the mean position of its already placed
neighbours, so children sit under their parents. Layers wrap into rows that keep the
picture roughly square; enumerations take the last rows, under a shorter band (no line reaches
an enumeration). In a model of up to ``CROSSING_BOXES`` boxes, each row of up to
``PERMUTED_ROW`` boxes then takes the order with the fewest crossings (``crossings``).

Given the layout it drew before (``keep``), every box that is still there stays where it was
(a person who adds a class finds the picture they knew): only new boxes, and a kept box that
grew into a neighbour, are placed, each at its fresh position slid right past whatever it
would cover.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from kernel_ext.model.index import ClassView, ModelIndex

CHAR_W = 7.0
LINE_H = 16
TITLE_H = 24
PAD = 8
GAP_X = 60
GAP_Y = 80
ENUM_GAP_Y = 30  # above the enumerations' rows: no line runs to an enumeration, so no band for arcs or labels
MARGIN = 20
TOP = 60  # room for arcs above the first row
MAX_LINES = 10
MAX_LINE_CHARS = 48
ABSTRACT = "\u00ababstract\u00bb"
ENUMERATION = "\u00abenumeration\u00bb"


@dataclass
class Box:
    name: str
    stereotype: str
    sections: list[list[str]]
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0
    row: int = 0
    column: int = 0

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    @property
    def head(self) -> float:
        """Height of the title band."""
        return TITLE_H + (LINE_H - 2 if self.stereotype else 0)


@dataclass
class Layout:
    boxes: dict[str, Box]
    width: float
    height: float
    rows: list[list[str]] = field(default_factory=list)

    def between(self, a: Box, b: Box) -> bool:
        """Whether another box stands between two boxes of one band (a straight line would cross it)."""
        left, right = (a, b) if a.x < b.x else (b, a)
        top, bottom = max(a.y, b.y), min(a.y + a.h, b.y + b.h)
        return any(
            box is not a and box is not b and box.x >= left.x + left.w and box.x + box.w <= right.x
            and box.y < bottom and box.y + box.h > top
            for box in self.boxes.values()
        )


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float

    def meets(self, other: Rect, room: float = 0.0) -> bool:
        return not (self.x + self.w + room <= other.x or other.x + other.w + room <= self.x
                    or self.y + self.h + room <= other.y or other.y + other.h + room <= self.y)


Segment = tuple[float, float, float, float]


def crosses(rect: Rect, segment: Segment) -> bool:
    """Whether a line segment passes through a rectangle (Liang-Barsky clipping)."""
    x1, y1, x2, y2 = segment
    dx, dy = x2 - x1, y2 - y1
    low, high = 0.0, 1.0
    for p, q in ((-dx, x1 - rect.x), (dx, rect.x + rect.w - x1), (-dy, y1 - rect.y), (dy, rect.y + rect.h - y1)):
        if p == 0:
            if q < 0:
                return False
            continue
        t = q / p
        if p < 0:
            low = max(low, t)
        else:
            high = min(high, t)
        if low > high:
            return False
    return True


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "\u2026"


def _limited(rows: list[str]) -> list[str]:
    if len(rows) <= MAX_LINES:
        return [_clip(r) for r in rows]
    return [_clip(r) for r in rows[: MAX_LINES - 1]] + [f"\u2026 {len(rows) - MAX_LINES + 1} more"]


def _class_box(view: ClassView) -> Box:
    attrs = _limited(
        [f"{a.name}: {a.type}" + ("" if a.multiplicity == "1..1" else f" [{a.multiplicity}]") for a in view.own_attributes]
    )
    methods = _limited([m.signature.replace(" -> ", ": ") for m in view.own_methods])
    return Box(view.name, ABSTRACT if view.is_abstract else "", [attrs, methods])


def _size(box: Box) -> None:
    longest = max([len(box.name) + 2, len(box.stereotype)] + [len(r) for s in box.sections for r in s])
    box.w = max(110.0, PAD * 2 + CHAR_W * longest)
    box.h = box.head + sum(max(1, len(s)) * LINE_H + PAD for s in box.sections)


def _depths(index: ModelIndex) -> dict[str, int]:
    depth: dict[str, int] = {}

    def level(name: str, trail: tuple[str, ...]) -> int:
        if name not in depth:
            parents = [p for p in index.classes[name].parents if p in index.classes and p not in trail]
            depth[name] = 1 + max((level(p, (*trail, name)) for p in parents), default=-1)
        return depth[name]

    for name in index.classes:
        level(name, ())
    return depth


def _neighbours(index: ModelIndex) -> dict[str, set[str]]:
    near: dict[str, set[str]] = {n: set() for n in index.classes}
    for view in index.classes.values():
        for other in (*view.parents, *view.children, *(e.target for e in view.ends if e.declared_in == view.name)):
            if other in near and other != view.name:
                near[view.name].add(other)
                near[other].add(view.name)
    return near


def _ordered_layers(index: ModelIndex) -> list[list[str]]:
    depth = _depths(index)
    near = _neighbours(index)
    walk: list[str] = []
    seen: set[str] = set()
    for start in sorted(index.classes, key=lambda n: (-len(near[n]), n)):
        if start in seen:
            continue
        queue, seen = [start], seen | {start}
        while queue:
            current = queue.pop(0)
            walk.append(current)
            for nxt in sorted(near[current] - seen, key=lambda n: (-len(near[n]), n)):
                seen.add(nxt)
                queue.append(nxt)
    rank = {name: i for i, name in enumerate(walk)}
    layers: dict[int, list[str]] = {}
    for name in walk:
        layers.setdefault(depth[name], []).append(name)
    ordered: list[list[str]] = []
    position: dict[str, float] = {}
    for d in sorted(layers):
        layer = layers[d]
        if ordered:
            def key(n: str) -> tuple[float, int]:
                placed = [position[m] for m in near[n] if m in position]
                return (sum(placed) / len(placed) if placed else math.inf, rank[n])

            layer = sorted(layer, key=key)
        for i, name in enumerate(layer):
            position[name] = i / max(1, len(layer) - 1)
        ordered.append(layer)
    return ordered


def layout(index: ModelIndex, keep: Layout | None = None) -> Layout:
    """Where every box goes; with ``keep`` (the layout drawn before), boxes still there do not move."""
    fresh = _fresh(index)
    return fresh if keep is None else _kept(fresh, keep)


CLEARANCE = 20.0  # the least room between two boxes placed around kept ones


def _clash(a: Box, b: Box) -> bool:
    return not (a.x + a.w + CLEARANCE <= b.x or b.x + b.w + CLEARANCE <= a.x
                or a.y + a.h + CLEARANCE <= b.y or b.y + b.h + CLEARANCE <= a.y)


def _kept(fresh: Layout, keep: Layout) -> Layout:
    settled: list[Box] = []
    moving: list[Box] = []
    for name in sorted((n for n in fresh.boxes if n in keep.boxes), key=lambda n: (keep.boxes[n].y, keep.boxes[n].x)):
        box, old = fresh.boxes[name], keep.boxes[name]
        box.x, box.y = old.x, old.y
        (moving if any(_clash(box, other) for other in settled) else settled).append(box)
    order = [name for row in fresh.rows for name in row]
    moving += [fresh.boxes[name] for name in order if name not in keep.boxes]
    for box in moving:  # at its fresh place, slid right past every box it would cover
        if box.name in keep.boxes:
            box.x = float(MARGIN)
        while True:
            hit = [other for other in settled if _clash(box, other)]
            if not hit:
                break
            box.x = max(other.x + other.w for other in hit) + GAP_X
        settled.append(box)
    width = max(box.x + box.w for box in fresh.boxes.values()) + MARGIN if fresh.boxes else fresh.width
    height = max(box.y + box.h for box in fresh.boxes.values()) + MARGIN if fresh.boxes else fresh.height
    return Layout(fresh.boxes, width, height, fresh.rows)


def _fresh(index: ModelIndex) -> Layout:
    boxes = {v.name: _class_box(v) for v in index.classes.values()}
    for name, literals in index.enumerations.items():
        boxes[name] = Box(name, ENUMERATION, [_limited(list(literals))])
    for box in boxes.values():
        _size(box)
    columns = max(4, math.ceil(math.sqrt(len(boxes)) * 1.3))
    rows: list[list[str]] = []
    for layer in _ordered_layers(index):
        rows.extend(layer[i : i + columns] for i in range(0, len(layer), columns) if layer[i : i + columns])
    first_enum = len(rows)
    enums = list(index.enumerations)
    rows.extend(enums[i : i + columns] for i in range(0, len(enums), columns))
    y = float(TOP)
    for r, row in enumerate(rows):
        if r == first_enum and r > 0:
            y -= GAP_Y - ENUM_GAP_Y
        _place_row(boxes, row, r, y)
        y += max(boxes[n].h for n in row) + GAP_Y
    if len(boxes) <= CROSSING_BOXES:
        _fewer_crossings(boxes, rows[:first_enum], _edges(index))
    width = max(box.x + box.w for box in boxes.values()) + MARGIN if boxes else 2 * MARGIN
    return Layout(boxes, width, y - GAP_Y + MARGIN, rows)


def _place_row(boxes: dict[str, Box], row: list[str], r: int, y: float) -> None:
    x = float(MARGIN)
    for c, name in enumerate(row):
        box = boxes[name]
        box.x, box.y, box.row, box.column = x, y, r, c
        x += box.w + GAP_X


PERMUTED_ROW = 5  # a row of at most this many boxes is tried in every order (120)
CROSSING_BOXES = 16  # past this many boxes rows keep their barycentre order (each count is quadratic in edges)


def _edges(index: ModelIndex) -> list[tuple[str, str]]:
    near = _neighbours(index)
    return sorted({(a, b) if a < b else (b, a) for a, others in near.items() for b in others})


def _fewer_crossings(boxes: dict[str, Box], rows: list[list[str]], edges: list[tuple[str, str]]) -> None:
    """Reorder each short row where another order has fewer crossings (straight lines between box
    centres that cross each other or run through a third box); ties keep the barycentre order."""
    if not edges:
        return
    for _sweep in range(2):
        for r, row in enumerate(rows):
            if not 2 <= len(row) <= PERMUTED_ROW:
                continue
            y = boxes[row[0]].y
            best, best_cost = list(row), crossings(boxes, edges)
            for order in itertools.permutations(row):
                _place_row(boxes, list(order), r, y)
                cost = crossings(boxes, edges)
                if cost < best_cost:
                    best, best_cost = list(order), cost
            row[:] = best
            _place_row(boxes, row, r, y)


def crossings(boxes: dict[str, Box], edges: list[tuple[str, str]]) -> int:
    """Pairs of centre-to-centre edges that cross, plus twice each edge that runs through a third box."""
    lines = [(a, b, (boxes[a].cx, boxes[a].cy, boxes[b].cx, boxes[b].cy)) for a, b in edges if a in boxes and b in boxes]
    count = 0
    for i, (a, b, seg) in enumerate(lines):
        count += sum(_intersect(seg, other) for c, d, other in lines[i + 1:] if not {a, b} & {c, d})
        count += 2 * sum(crosses(Rect(box.x, box.y, box.w, box.h), seg) for name, box in boxes.items() if name not in (a, b))
    return count


def _intersect(s: Segment, t: Segment) -> bool:
    def side(ax: float, ay: float, bx: float, by: float, cx: float, cy: float) -> float:
        return (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)

    d1, d2 = side(*t[:2], *t[2:], *s[:2]), side(*t[:2], *t[2:], *s[2:])
    d3, d4 = side(*s[:2], *s[2:], *t[:2]), side(*s[:2], *s[2:], *t[2:])
    return d1 * d2 < 0 and d3 * d4 < 0


def border(box: Box, tx: float, ty: float) -> tuple[float, float]:
    """Where the segment from the box centre towards (tx, ty) leaves the box."""
    dx, dy = tx - box.cx, ty - box.cy
    if dx == 0 and dy == 0:
        return box.cx, box.cy
    scale = min(box.w / 2 / abs(dx) if dx else math.inf, box.h / 2 / abs(dy) if dy else math.inf)
    return box.cx + dx * scale, box.cy + dy * scale


def unit(dx: float, dy: float) -> tuple[float, float]:
    length = math.hypot(dx, dy) or 1.0
    return dx / length, dy / length
