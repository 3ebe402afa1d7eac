"""Where the class diagram's small labels go: never over a box or over another label, and over
no line but their own where a spot is free of lines.

Each label (an association's name, a role with its multiplicity) comes with the places it
would like, best first (along its line, on either side); it takes the first that is free. When
all are taken, it looks further out, ring by ring around its first choice, until one is free.
A spot crossed by another edge's line (``lines``, every edge known before any label is placed)
counts as taken in a first search out to ``LINE_RINGS``; only when none is free of lines is a
line crossed (a label on its plate stays readable). Notes (OCL invariants) are placed the same way.
Labels and boxes are rectangles; a label never leaves the top or left edge of the picture, and
the picture grows to take a label pushed past its right or bottom edge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from kernel_ext.model.layout import Box, Rect, Segment, crosses

CHAR_W = 6.0  # a 10 px monospace character
HEIGHT = 12.0
ROOM = 2.0  # the least space around a label
RINGS = 80  # how far the search goes (rings of RING px) before it settles for the first choice
LINE_RINGS = 8  # how far a label goes looking for a spot that no other edge's line crosses
RING = 6.0


def label_rect(x: float, y: float, text: str) -> Rect:
    """The plate of a label centred on ``x`` with its baseline at ``y`` (as ``diagram._label`` draws it)."""
    w = len(text) * CHAR_W + 4
    return Rect(x - w / 2, y - 9, w, HEIGHT)


def box_rect(box: Box) -> Rect:
    return Rect(box.x, box.y, box.w, box.h)


class LabelPlacer:
    def __init__(self, boxes: Iterable[Box], lines: Iterable[tuple[object, Segment]] = ()):
        self.obstacles = [box_rect(b) for b in boxes]
        self.placed: list[Rect] = []
        self.lines = list(lines)  # (owner, segment): a label may sit on its own edge's line, not another's

    def free(self, rect: Rect, owner: object = None, lines: bool = False) -> bool:
        if rect.x < 0 or rect.y < 0:
            return False
        if any(rect.meets(o, ROOM) for o in self.obstacles) or any(rect.meets(p, ROOM) for p in self.placed):
            return False
        return not lines or not any(who != owner and crosses(rect, seg) for who, seg in self.lines)

    def place(self, text: str, wanted: Iterable[tuple[float, float]], owner: object = None) -> tuple[float, float]:
        """The first free spot of ``wanted``, else the nearest free one around the first of them."""
        w, h = len(text) * CHAR_W + 4, HEIGHT
        x, y = self.place_rect(w, h, [(x - w / 2, y - 9) for x, y in wanted], owner)
        return x + w / 2, y + 9

    def place_rect(self, w: float, h: float, wanted: Iterable[tuple[float, float]], owner: object = None) -> tuple[float, float]:
        """The top-left corner of a ``w`` x ``h`` rectangle at the first free spot (lines avoided first)."""
        choices = list(wanted)
        for lines, reach in ((True, LINE_RINGS), (False, RINGS)):
            for x, y in choices:
                if self.free(Rect(x, y, w, h), owner, lines):
                    return self._take(Rect(x, y, w, h))
            x0, y0 = choices[0]
            for ring in range(1, reach + 1):
                steps = 8 * ring
                for step in range(steps):
                    angle = 2 * math.pi * step / steps
                    x, y = x0 + math.cos(angle) * ring * RING, y0 + math.sin(angle) * ring * RING
                    if self.free(Rect(x, y, w, h), owner, lines):
                        return self._take(Rect(x, y, w, h))
        return self._take(Rect(*choices[0], w, h))  # nothing free within reach: the first choice (never reached in practice)

    def _take(self, rect: Rect) -> tuple[float, float]:
        self.placed.append(rect)
        return rect.x, rect.y

    def extent(self) -> tuple[float, float]:
        """The right and bottom edges of every label placed (the picture grows to hold them)."""
        if not self.placed:
            return 0.0, 0.0
        return max(r.x + r.w for r in self.placed), max(r.y + r.h for r in self.placed)


def along(x1: float, y1: float, x2: float, y2: float, at: Iterable[float], sides: Iterable[float]) -> list[tuple[float, float]]:
    """Points at fractions ``at`` of a segment, each offset ``sides`` px across it (+ is left of the way)."""
    length = math.hypot(x2 - x1, y2 - y1) or 1.0
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    out: list[tuple[float, float]] = []
    for t in at:
        px, py = x1 + (x2 - x1) * t, y1 + (y2 - y1) * t
        out.extend((px - uy * s, py + ux * s + 3) for s in sides)
    return out


def near_end(x: float, y: float, ux: float, uy: float, text: str) -> list[tuple[float, float]]:
    """Spots for a role label near the end at (x, y) of a line heading (ux, uy) away from its box."""
    half = len(text) * CHAR_W / 2
    out = []
    for distance in (26.0, 40.0, 56.0):
        for side in (1.0, -1.0):
            for across in (11.0, 11.0 + half / 2, 24.0):
                out.append((x + ux * distance + uy * across * side, y + uy * distance - ux * across * side + 4))
    return out
