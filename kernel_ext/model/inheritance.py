"""Bounds on a model's inheritance graph, checked before BESSER walks it.

BESSER's ``Class.all_parents()`` recurses over every path to every ancestor without
memoising, and its ``Generalization`` setters, ``validate()`` and the generators call it:
a "diamond ladder" (A_i and B_i each inheriting from both A_{i-1} and B_{i-1}) costs
2^depth, so a 9 KB file held a thread forever; a cycle recurses until ``RecursionError``.
Every loader (JSON, PlantUML, safe Python, a ``DomainModel`` object) passes its graph here
first. One memoised walk, linear in classes + generalizations, counts
``paths(c) = 1 + sum(paths(parent))`` (what ``all_parents`` visits), the longest chain and
the model's total; past a bound: ``too_large`` naming the class; a cycle: ``invalid_model``.
``MAX_PATHS`` keeps one ``all_parents`` call near 20-30 ms (measured ~2 us a path).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kernel_ext.errors import ErrorCode, ToolFailure

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

MAX_PATHS = 10_000         # ancestor paths of one class (one BESSER all_parents call)
MAX_TOTAL_PATHS = 100_000  # summed over the model's classes (one validate() or generator sweep)
MAX_DEPTH = 100            # longest inheritance chain (BESSER recurses once a level)


N = TypeVar("N", bound=Hashable)  # a node: a class name, or the id of a B-UML class


def bound_both(parents: Mapping[N, Sequence[N]], names: Mapping[N, str] | None = None, *,
               origin: str = "the model") -> None:
    """Bound ``parents`` upwards (``all_parents``) and downwards (``all_specializations``, same walk)."""
    bound_graph(parents, names, origin=origin)
    children: dict[N, list[N]] = {}
    for node, direct in parents.items():
        for parent in direct:
            children.setdefault(parent, []).append(node)
    bound_graph(children, names, origin=origin, toward="descendants")


def bound_graph(parents: Mapping[N, Sequence[N]], names: Mapping[N, str] | None = None, *,
                origin: str = "the model", toward: str = "ancestors") -> None:
    """Refuse a cycle or a graph past the bounds; ``parents`` maps a node to its direct parents.

    Nodes not in ``parents`` have none. ``toward`` names the direction in messages.
    """
    def name(node: N) -> str:
        return names.get(node, str(node)) if names is not None else str(node)

    paths: dict[N, int] = {}
    depth: dict[N, int] = {}
    total = 0
    on_stack: set[N] = set()
    for start in list(parents):
        if start in paths:
            continue
        stack = [(start, iter(parents.get(start, ())))]
        on_stack.add(start)
        while stack:
            node, pending = stack[-1]
            for parent in pending:
                if parent in paths:
                    continue
                if parent in on_stack:
                    raise ToolFailure(
                        ErrorCode.INVALID_MODEL,
                        f"{origin}: inheritance is circular: {name(parent)} inherits from itself (through {name(node)})",
                    )
                on_stack.add(parent)
                stack.append((parent, iter(parents.get(parent, ()))))
                break
            else:
                stack.pop()
                on_stack.discard(node)
                direct = [p for p in parents.get(node, ())]
                count = 1 + sum(paths[p] for p in direct)
                level = 1 + max((depth[p] for p in direct), default=0)
                if count > MAX_PATHS:
                    raise ToolFailure(ErrorCode.TOO_LARGE,
                                      f"{origin}: inheritance of {name(node)} has more than {MAX_PATHS} paths to its {toward}")
                if level > MAX_DEPTH:
                    raise ToolFailure(ErrorCode.TOO_LARGE,
                                      f"{origin}: inheritance of {name(node)} is more than {MAX_DEPTH} levels deep ({toward})")
                total += count
                if total > MAX_TOTAL_PATHS:
                    raise ToolFailure(
                        ErrorCode.TOO_LARGE,
                        f"{origin}: inheritance has more than {MAX_TOTAL_PATHS} paths to {toward} over all classes "
                        f"(reached at {name(node)})",
                    )
                paths[node] = count
                depth[node] = level


def bound_names(edges: Iterable[tuple[str, str]], *, origin: str = "the model") -> None:
    """Check ``(specific, general)`` name pairs, as a model file states them, before any object exists."""
    parents: dict[str, list[str]] = {}
    for specific, general in edges:
        parents.setdefault(str(specific), []).append(str(general))
    bound_both(parents, origin=origin)


def bound_classes(classes: Iterable[Any], *, extra: tuple[Any, Any] | None = None, origin: str = "the model",
                  down_from: Iterable[Any] | None = None) -> None:
    """Check what BESSER would walk from B-UML ``Class`` objects, reading generalizations only.

    Upwards from ``classes`` (``all_parents``), downwards from ``down_from`` (default: the same;
    ``all_specializations``). Never calls ``parents()``/``all_parents()``/``all_specializations()``.
    ``extra`` is a ``(specific, general)`` edge about to be made (a ``Generalization`` being built
    or re-pointed), checked before BESSER walks it. Linear in what it reaches, not the whole model.
    """
    starts = list(classes)
    names: dict[int, str] = {}
    up = _reach(starts, "general", extra, names)
    bound_graph(up, names, origin=origin)
    flipped = (extra[1], extra[0]) if extra is not None else None
    down = _reach(starts if down_from is None else list(down_from), "specific", flipped, names)
    bound_graph(down, names, origin=origin, toward="descendants")


def _reach(starts: list[Any], end: str, extra: tuple[Any, Any] | None, names: dict[int, str]) -> dict[int, list[int]]:
    """``id -> [ids one step away]`` over every class reachable from ``starts`` through ``end`` of generalizations."""
    step: dict[int, list[int]] = {}
    todo = [c for c in starts if c is not None]
    while todo:
        cls = todo.pop()
        key = id(cls)
        if key in step:
            continue
        names[key] = str(getattr(cls, "name", key))
        direct: list[int] = []
        for generalization in list(getattr(cls, "generalizations", None) or ()):
            other = _field(generalization, end)
            if other is not None and other is not cls:  # BESSER's parents()/specializations(): every other end
                direct.append(id(other))
                todo.append(other)
        if extra is not None and extra[0] is cls and extra[1] is not None:
            direct.append(id(extra[1]))
            todo.append(extra[1])
        step[key] = direct
    return step


def bound_model(model: DomainModel, *, origin: str = "the model") -> None:
    """Check a ``DomainModel``'s classes (and the generalizations it lists) before BESSER walks them."""
    classes = list(model.get_classes())
    for generalization in list(getattr(model, "generalizations", None) or ()):
        for end in ("specific", "general"):
            found = _field(generalization, end)
            if found is not None:
                classes.append(found)
    bound_classes(classes, origin=origin)


def _field(generalization: Any, end: str) -> Any:
    try:
        return getattr(generalization, end)
    except AttributeError:  # a Generalization whose constructor failed half-way
        return None
