"""A query index over a DomainModel, built once, so each question costs a dictionary lookup.

The LLM asks about one class at a time (``query_class``) or filters classes
(``list_classes_with``); walking BESSER's objects for every question (inheritance is
recomputed recursively on each ``all_parents()`` call) would make a 200-class model
expensive. The index flattens what a question needs once: attributes and methods with
their declaring class (inherited ones included, overrides resolved), association ends seen
from both sides, constraints by context class, and inverted maps for the predicates.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernel_ext.model.jsonform import multiplicity_text, type_name

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

TYPE_ALIASES = {"integer": "int", "string": "str", "boolean": "bool", "double": "float", "number": "float"}


@dataclass(frozen=True)
class AttributeView:
    name: str
    type: str
    multiplicity: str
    flags: tuple[str, ...]
    declared_in: str


@dataclass(frozen=True)
class MethodView:
    name: str
    parameters: tuple[tuple[str, str, Any], ...]  # (name, type, default)
    returns: str | None
    declared_in: str
    is_abstract: bool
    code: str

    @property
    def signature(self) -> str:
        params = ", ".join(
            f"{n}: {t}" + (f" = {d!r}" if d is not None else "") for n, t, d in self.parameters
        )
        return f"{self.name}({params})" + (f" -> {self.returns}" if self.returns else "")


@dataclass(frozen=True)
class EndView:
    """An association seen from one class: ``own_role`` is this side, ``role`` the far side."""

    association: str
    role: str
    target: str
    multiplicity: str
    own_role: str
    own_multiplicity: str
    navigable: bool
    owns: bool  # composition: this class is the whole, the far side its parts
    part_of: bool  # composition: this class is a part of the far side
    declared_in: str


@dataclass(frozen=True)
class ConstraintView:
    name: str
    context: str
    expression: str
    language: str
    kind: str  # invariant | pre | post
    method: str | None = None


@dataclass
class ClassView:
    name: str
    is_abstract: bool
    parents: tuple[str, ...]
    ancestors: tuple[str, ...]  # nearest first
    children: tuple[str, ...]
    attributes: tuple[AttributeView, ...] = ()
    methods: tuple[MethodView, ...] = ()
    ends: tuple[EndView, ...] = ()
    constraints: tuple[ConstraintView, ...] = ()  # own and inherited (context tells which)

    @property
    def own_attributes(self) -> tuple[AttributeView, ...]:
        return tuple(a for a in self.attributes if a.declared_in == self.name)

    @property
    def own_methods(self) -> tuple[MethodView, ...]:
        return tuple(m for m in self.methods if m.declared_in == self.name)


@dataclass
class ModelIndex:
    """Everything a model question needs, keyed by class name."""

    model: Any
    name: str
    classes: dict[str, ClassView]
    enumerations: dict[str, tuple[str, ...]]
    association_count: int
    generalization_count: int
    constraint_count: int
    by_attribute: dict[str, set[str]] = field(default_factory=dict)
    by_type: dict[str, set[str]] = field(default_factory=dict)
    neighbours: dict[str, set[str]] = field(default_factory=dict)
    descendants: dict[str, set[str]] = field(default_factory=dict)
    _lower: dict[str, str] = field(default_factory=dict)
    _cache: dict[tuple, Any] = field(default_factory=dict)

    def find(self, name: str) -> ClassView | None:
        """Exact name first, then case-insensitive."""
        view = self.classes.get(name)
        if view is None:
            real = self._lower.get(name.strip().lower())
            view = self.classes.get(real) if real else None
        return view

    def suggestions(self, name: str, n: int = 5) -> list[str]:
        import difflib

        return difflib.get_close_matches(name, list(self.classes), n=n, cutoff=0.5)

    def cached(self, key: tuple, build: Any) -> Any:
        """Memoised renderings (the index is immutable once built)."""
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]


def build_index(model: DomainModel) -> ModelIndex:
    """Walk the model once; see the module docstring."""
    from besser.BUML.metamodel.structural import Class, Enumeration

    classes = sorted((t for t in model.types if isinstance(t, Class)), key=lambda c: c.name)
    enumerations = {
        t.name: tuple(sorted(lit.name for lit in t.literals)) for t in model.types if isinstance(t, Enumeration)
    }
    parents = {c.name: tuple(sorted(p.name for p in c.parents())) for c in classes}
    children: dict[str, list[str]] = defaultdict(list)
    for child, ps in parents.items():
        for p in ps:
            children[p].append(child)
    ancestors = {c.name: _ancestors(c.name, parents) for c in classes}

    own_attrs = {c.name: sorted((_attribute(a, c.name) for a in c.attributes), key=lambda a: a.name) for c in classes}
    own_methods = {c.name: sorted((_method(m, c.name) for m in c.methods), key=lambda m: m.name) for c in classes}
    own_ends = {c.name: _ends(c) for c in classes}
    own_constraints: dict[str, list[ConstraintView]] = defaultdict(list)
    for con in model.constraints:
        own_constraints[_named(con.context)].append(
            ConstraintView(con.name, _named(con.context), con.expression, con.language, "invariant")
        )
    for c in classes:
        for m in c.methods:
            for kind in ("pre", "post"):
                for con in getattr(m, kind) or []:
                    own_constraints[c.name].append(
                        ConstraintView(con.name, _named(con.context), con.expression, con.language, kind, m.name)
                    )

    views: dict[str, ClassView] = {}
    by_attribute: dict[str, set[str]] = defaultdict(set)
    by_type: dict[str, set[str]] = defaultdict(set)
    neighbours: dict[str, set[str]] = defaultdict(set)
    for c in classes:
        lineage = (c.name, *ancestors[c.name])
        attrs = [a for owner in lineage for a in own_attrs.get(owner, [])]
        methods, seen = [], set()
        for owner in lineage:  # nearest definition wins: overrides hide the parent's method
            for m in own_methods.get(owner, []):
                if m.name not in seen:
                    seen.add(m.name)
                    methods.append(m)
        ends = [e for owner in lineage for e in own_ends.get(owner, [])]
        constraints = [k for owner in lineage for k in sorted(own_constraints.get(owner, []), key=lambda k: (k.kind, k.name))]
        views[c.name] = ClassView(
            name=c.name,
            is_abstract=bool(c.is_abstract),
            parents=parents[c.name],
            ancestors=ancestors[c.name],
            children=tuple(sorted(children.get(c.name, []))),
            attributes=tuple(attrs),
            methods=tuple(methods),
            ends=tuple(ends),
            constraints=tuple(constraints),
        )
        for a in attrs:
            by_attribute[a.name.lower()].add(c.name)
            by_type[a.type.lower()].add(c.name)
        for e in ends:
            neighbours[c.name].add(e.target)

    descendants: dict[str, set[str]] = defaultdict(set)
    for name, anc in ancestors.items():
        for ancestor in anc:
            descendants[ancestor].add(name)
    return ModelIndex(
        model=model,
        name=model.name,
        classes=views,
        enumerations=enumerations,
        association_count=len(model.associations),
        generalization_count=len(model.generalizations),
        constraint_count=sum(len(v) for v in own_constraints.values()),
        by_attribute=dict(by_attribute),
        by_type=dict(by_type),
        neighbours=dict(neighbours),
        descendants=dict(descendants),
        _lower={n.lower(): n for n in views},
    )


def _ancestors(name: str, parents: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Breadth-first, nearest first, each once; cycles (an invalid model) cannot loop."""
    out: list[str] = []
    seen: set[str] = {name}
    frontier = list(parents.get(name, ()))
    while frontier:
        nxt: list[str] = []
        for p in frontier:
            if p not in seen:
                seen.add(p)
                out.append(p)
                nxt.extend(parents.get(p, ()))
        frontier = nxt
    return tuple(out)


def _attribute(p: Any, owner: str) -> AttributeView:
    flags = tuple(
        label
        for label, on in (
            ("id", p.is_id),
            ("optional", p.is_optional),
            ("read-only", p.is_read_only),
            ("external-id", getattr(p, "is_external_id", False)),
        )
        if on
    )
    return AttributeView(p.name, type_name(p.type) or "any", multiplicity_text(p.multiplicity), flags, owner)


def _method(m: Any, owner: str) -> MethodView:
    params = tuple((prm.name, type_name(prm.type) or "any", prm.default_value) for prm in m.parameters)
    return MethodView(m.name, params, type_name(m.type), owner, bool(m.is_abstract), m.code or "")


def _ends(cls: Any) -> list[EndView]:
    views = []
    for assoc in cls.associations:
        ends = list(assoc.ends)
        if len(ends) != 2:
            continue
        for near, far in ((ends[0], ends[1]), (ends[1], ends[0])):
            if near.type is not cls:
                continue
            views.append(
                EndView(
                    association=assoc.name,
                    role=far.name,
                    target=_named(far.type),
                    multiplicity=multiplicity_text(far.multiplicity),
                    own_role=near.name,
                    own_multiplicity=multiplicity_text(near.multiplicity),
                    navigable=bool(far.is_navigable),
                    owns=bool(near.is_composite),
                    part_of=bool(far.is_composite),
                    declared_in=cls.name,
                )
            )
    return sorted(views, key=lambda e: (e.association, e.role))


def _named(t: Any) -> str:
    """The name of a type B-UML always sets (a constraint's context, an association end's class)."""
    return type_name(t) or ""
