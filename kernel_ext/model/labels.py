"""Where the class diagram's small labels go: never over a box or over another label.

Each label (an association's name, a role with its multiplicity) comes with the places it
would like, best first (along its line, on either side); it takes the first that is free. When
all are taken, it looks further out, ring by ring around its first choice, until one is free.
Labels and boxes are rectangles; a label never leaves the top or left edge of the picture, and
the picture grows to take a label pushed past its right or bottom edge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from kernel_ext.model.layout import Box

CHAR_W = 6.0  # a 10 px monospace character
HEIGHT = 12.0
ROOM = 2.0  # the least space around a label
RINGS = 80  # how far the search goes (rings of RING px) before it settles for the first choice
RING = 6.0


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float

    def meets(self, other: Rect, room: float = 0.0) -> bool:
        return not (self.x + self.w + room <= other.x or other.x + other.w + room <= self.x
                    or self.y + self.h + room <= other.y or other.y + other.h + room <= self.y)


def label_rect(x: float, y: float, text: str) -> Rect:
    """The plate of a label centred on ``x`` with its baseline at ``y`` (as ``diagram._label`` draws it)."""
    w = len(text) * CHAR_W + 4
    return Rect(x - w / 2, y - 9, w, HEIGHT)


def box_rect(box: Box) -> Rect:
    return Rect(box.x, box.y, box.w, box.h)


class LabelPlacer:
    def __init__(self, boxes: Iterable[Box]):
        self.obstacles = [box_rect(b) for b in boxes]
        self.placed: list[Rect] = []

    def free(self, rect: Rect) -> bool:
        if rect.x < 0 or rect.y < 0:
            return False
        return not any(rect.meets(o, ROOM) for o in self.obstacles) and not any(rect.meets(p, ROOM) for p in self.placed)

    def place(self, text: str, wanted: Iterable[tuple[float, float]]) -> tuple[float, float]:
        """The first free spot of ``wanted``, else the nearest free one around the first of them."""
        choices = list(wanted)
        for x, y in choices:
            if self.free(label_rect(x, y, text)):
                return self._take(x, y, text)
        x0, y0 = choices[0]
        for ring in range(1, RINGS + 1):
            steps = 8 * ring
            for step in range(steps):
                angle = 2 * math.pi * step / steps
                x, y = x0 + math.cos(angle) * ring * RING, y0 + math.sin(angle) * ring * RING
                if self.free(label_rect(x, y, text)):
                    return self._take(x, y, text)
        return self._take(x0, y0, text)  # nothing free within reach: the first choice (never reached in practice)

    def _take(self, x: float, y: float, text: str) -> tuple[float, float]:
        self.placed.append(label_rect(x, y, text))
        return x, y

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
