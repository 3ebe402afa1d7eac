"""What the LLM reads about a model: a compact overview and bounded answers per question.

Every answer has a character budget; a section that would overflow it is cut with a line
saying how much was left out and how to ask for it. Each answer also has a ``data`` dict
(bounded the same way) for the UI. Renderings are memoised on the index.
"""

from __future__ import annotations

from typing import Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.model.index import ClassView, ModelIndex

CLASS_BUDGET = 6_000
OVERVIEW_BUDGET = 7_000
LIST_LIMIT = 100
CODE_LINES = 12
DATA_LIMIT = 200


class _Text:
    """Lines under a character budget; ``add`` returns False once the budget is spent."""

    def __init__(self, budget: int):
        self.budget = budget
        self.lines: list[str] = []
        self.size = 0

    def add(self, line: str) -> bool:
        if self.size + len(line) + 1 > self.budget:
            return False
        self.lines.append(line)
        self.size += len(line) + 1
        return True

    def section(self, title: str, rows: list[str], more_hint: str, count: int | None = None) -> None:
        if not rows:
            return
        if not self.add(f"{title} ({len(rows) if count is None else count}):"):
            return
        for i, row in enumerate(rows):
            if not self.add(row):
                self.lines.append(f"  ... {len(rows) - i} more {more_hint}")
                self.size += 40
                return

    def text(self) -> str:
        return "\n".join(self.lines)


def require_class(index: ModelIndex, name: str) -> ClassView:
    view = index.find(name)
    if view is not None:
        return view
    if name.strip() in index.enumerations:
        literals = ", ".join(index.enumerations[name.strip()])
        raise ToolFailure(ErrorCode.NOT_FOUND, f"{name!r} is an enumeration, not a class; its literals: {literals}")
    close = index.suggestions(name)
    hint = f"; did you mean {', '.join(close)}?" if close else "; list_classes_with {\"predicate\": \"name:*\"} lists them"
    raise ToolFailure(ErrorCode.NOT_FOUND, f"no class named {name!r} in model {index.name!r}{hint}")


# -- query_class ----------------------------------------------------------------------------


def describe_class(index: ModelIndex, name: str, budget: int = CLASS_BUDGET) -> tuple[str, dict[str, Any]]:
    view = require_class(index, name)
    return index.cached(("class", view.name, budget), lambda: (_class_text(index, view, budget), _class_data(view)))


def _from(owner: str, view: ClassView) -> str:
    return "" if owner == view.name else f"  (from {owner})"


def _attribute_row(index: ModelIndex, a: Any, view: ClassView) -> str:
    mult = "" if a.multiplicity == "1..1" else f" [{a.multiplicity}]"
    flags = f" {{{', '.join(a.flags)}}}" if a.flags else ""
    enum = index.enumerations.get(a.type)
    literals = f"  enum: {', '.join(enum[:12])}{', ...' if len(enum) > 12 else ''}" if enum else ""
    return f"  {a.name}: {a.type}{mult}{flags}{literals}{_from(a.declared_in, view)}"


def _method_rows(m: Any, view: ClassView) -> list[str]:
    head = f"  {m.signature}{' {abstract}' if m.is_abstract else ''}{_from(m.declared_in, view)}"
    if not m.code.strip():
        return [head + "  [no body]"]
    body = m.code.rstrip().splitlines()
    rows = [head] + [f"      | {line}" for line in body[:CODE_LINES]]
    if len(body) > CODE_LINES:
        rows.append(f"      | ... {len(body) - CODE_LINES} more lines")
    return rows


def _end_row(e: Any, view: ClassView) -> str:
    nav = "" if e.navigable else " (not navigable)"
    comp = " {owns parts}" if e.owns else " {part of}" if e.part_of else ""
    return (
        f"  {e.association}: {view.name}.{e.role} -> {e.target} [{e.multiplicity}]{nav}{comp}; "
        f"opposite {e.target}.{e.own_role} -> {e.declared_in} [{e.own_multiplicity}]{_from(e.declared_in, view)}"
    )


def _constraint_row(c: Any, view: ClassView) -> str:
    where = f" on {c.method}()" if c.method else ""
    inherited = "" if c.context == view.name else f"  (from {c.context})"
    return f"  {c.name} ({c.language} {c.kind}{where}): {c.expression}{inherited}"


def _class_text(index: ModelIndex, view: ClassView, budget: int) -> str:
    out = _Text(budget)
    head = f"class {view.name}" + (" {abstract}" if view.is_abstract else "")
    if view.parents:
        head += f" extends {', '.join(view.parents)}"
    out.add(head)
    if len(view.ancestors) > len(view.parents):
        out.add(f"ancestors: {', '.join(view.ancestors)}")
    if view.children:
        out.add(f"subclasses: {', '.join(view.children[:30])}" + (" ..." if len(view.children) > 30 else ""))
    out.section("attributes", [_attribute_row(index, a, view) for a in view.attributes], "attributes")
    out.section("methods", [row for m in view.methods for row in _method_rows(m, view)], "method lines", len(view.methods))
    out.section("associations", [_end_row(e, view) for e in view.ends], f"ends (list_classes_with associated_with:{view.name})")
    out.section(
        "constraints",
        [_constraint_row(c, view) for c in view.constraints],
        f"constraints (get_constraints_for {view.name})",
    )
    if not (view.attributes or view.methods or view.ends):
        out.add("(no attributes, methods or associations)")
    return out.text()


def _class_data(view: ClassView) -> dict[str, Any]:
    return {
        "name": view.name,
        "is_abstract": view.is_abstract,
        "parents": list(view.parents),
        "ancestors": list(view.ancestors),
        "children": list(view.children[:DATA_LIMIT]),
        "attributes": [
            {"name": a.name, "type": a.type, "multiplicity": a.multiplicity, "flags": list(a.flags), "declared_in": a.declared_in}
            for a in view.attributes[:DATA_LIMIT]
        ],
        "methods": [
            {"name": m.name, "signature": m.signature, "declared_in": m.declared_in, "has_body": bool(m.code.strip())}
            for m in view.methods[:DATA_LIMIT]
        ],
        "associations": [
            {
                "association": e.association, "role": e.role, "target": e.target, "multiplicity": e.multiplicity,
                "own_role": e.own_role, "own_multiplicity": e.own_multiplicity, "declared_in": e.declared_in,
            }
            for e in view.ends[:DATA_LIMIT]
        ],
        "constraints": [
            {"name": c.name, "context": c.context, "kind": c.kind, "method": c.method, "expression": c.expression[:500]}
            for c in view.constraints[:DATA_LIMIT]
        ],
    }


# -- get_constraints_for --------------------------------------------------------------------


def describe_constraints(index: ModelIndex, name: str, budget: int = CLASS_BUDGET) -> tuple[str, dict[str, Any]]:
    view = require_class(index, name)
    if not view.constraints:
        return f"{view.name} has no OCL constraints (own or inherited).", {"class": view.name, "constraints": []}
    out = _Text(budget)
    out.section(f"constraints on {view.name}", [_constraint_row(c, view) for c in view.constraints], "constraints")
    data = [
        {"name": c.name, "context": c.context, "kind": c.kind, "method": c.method, "language": c.language,
         "expression": c.expression[:2000]}
        for c in view.constraints[:DATA_LIMIT]
    ]
    return out.text(), {"class": view.name, "constraints": data}


# -- list_classes_with ----------------------------------------------------------------------


def describe_matches(index: ModelIndex, predicate: str, names: list[str]) -> tuple[str, dict[str, Any]]:
    if not names:
        return f"no class matches {predicate!r} (model {index.name!r} has {len(index.classes)} classes)", {"count": 0, "classes": []}
    shown = names[:LIST_LIMIT]
    text = f"{len(names)} of {len(index.classes)} classes match {predicate!r}: {', '.join(shown)}"
    if len(names) > LIST_LIMIT:
        text += f" ... and {len(names) - LIST_LIMIT} more (narrow the predicate with 'and')"
    return text, {"count": len(names), "classes": names[:DATA_LIMIT * 2]}


# -- overview -------------------------------------------------------------------------------


def overview(index: ModelIndex, budget: int = OVERVIEW_BUDGET) -> str:
    """Names and counts only; details come from the query tools."""
    return index.cached(("overview", budget), lambda: _overview(index, budget))


def _overview(index: ModelIndex, budget: int) -> str:
    views = list(index.classes.values())
    abstract = sum(v.is_abstract for v in views)
    methods = sum(len(v.own_methods) for v in views)
    out = _Text(budget)
    out.add(
        f"Model {index.name!r}: {len(views)} classes ({abstract} abstract), {len(index.enumerations)} enumerations, "
        f"{index.association_count} associations, {index.generalization_count} generalizations, "
        f"{methods} methods, {index.constraint_count} OCL constraints."
    )
    if index.enumerations:
        enums = "; ".join(f"{n}{{{','.join(lits[:8])}{',...' if len(lits) > 8 else ''}}}" for n, lits in index.enumerations.items())
        out.add(f"Enumerations: {enums[:800]}")
    out.add("Classes as Name[<Parent] aN attributes, mN methods, rN association ends, cN constraints (own), * abstract:")
    tokens = []
    for v in views:
        parts = [v.name + ("*" if v.is_abstract else "")]
        if v.parents:
            parts.append("<" + ",".join(v.parents))
        for label, n in (("a", len(v.own_attributes)), ("m", len(v.own_methods)), ("r", sum(e.declared_in == v.name for e in v.ends)),
                         ("c", sum(c.context == v.name for c in v.constraints))):
            if n:
                parts.append(f"{label}{n}")
        tokens.append(" ".join(parts))
    line: list[str] = []
    reserve = 200  # for the closing hint
    for i, token in enumerate(tokens):
        if out.size + sum(len(t) + 2 for t in line) + len(token) + reserve > budget:
            out.add("; ".join(line))
            out.add(f"... and {len(tokens) - i} more classes (list_classes_with {{\"predicate\": \"name:*\"}})")
            line = []
            break
        line.append(token)
        if len(line) == 8:
            out.add("; ".join(line))
            line = []
    if line:
        out.add("; ".join(line))
    out.add("Ask for details with query_class {name}, list_classes_with {predicate}, get_constraints_for {class_name}.")
    return out.text()
