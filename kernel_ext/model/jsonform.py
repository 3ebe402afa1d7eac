"""A JSON form of a B-UML ``DomainModel`` that round-trips, and the model's digest.

BESSER's own JSON converters live in its web-editor backend, which needs extras a plain
``pip install besser`` lacks (``deep_translator`` and others), so this project keeps its own,
small form. It is canonical: every list is sorted and only non-default flags are written, so
``model_to_dict`` of a model loaded back from its dict is equal to the dict, and two models
with the same structure have the same digest whatever notation they came from.

Kept: name, enumerations, classes (abstract, attributes with types, multiplicities and flags,
methods with parameters, return type and code), binary associations with both ends,
generalizations, constraints (invariants, and methods' pre/postconditions by name).
Not kept: metadata, timestamps, packages, generalization sets, behaviours, state machines.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from kernel_ext import safejson
from kernel_ext.errors import ErrorCode, ToolFailure

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

FORMAT = "besser-jupyter-agent/domain-model"
VERSION = 1
UNLIMITED = 9999  # BESSER's UNLIMITED_MAX_MULTIPLICITY, written as "*"
MAX_ELEMENTS = 20_000  # classes, attributes, methods, parameters, literals, ends...: building costs grow with it
MAX_TEXT_CHARS = 64 * 1024  # one method body, OCL expression or default value

_PROPERTY_FLAGS = {
    # flag: default
    "is_id": False,
    "is_optional": False,
    "is_read_only": False,
    "is_external_id": False,
    "is_composite": False,
    "is_navigable": True,
}


# -- model -> dict --------------------------------------------------------------------------


def multiplicity_text(mult: Any) -> str:
    """``"0..*"``, ``"1..1"``: always both bounds, so the text is canonical."""
    high = "*" if mult.max >= UNLIMITED else str(mult.max)
    return f"{mult.min}..{high}"


def type_name(t: Any) -> str | None:
    if t is None:
        return None
    return t if isinstance(t, str) else getattr(t, "name", str(t))


def _property(p: Any, *, with_type: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name}
    if with_type:
        out["type"] = type_name(p.type)
    out["multiplicity"] = multiplicity_text(p.multiplicity)
    for flag, default in _PROPERTY_FLAGS.items():
        value = bool(getattr(p, flag, default))
        if value != default:
            out[flag] = value
    if getattr(p, "visibility", "public") != "public":
        out["visibility"] = p.visibility
    if p.default_value is not None:
        out["default"] = _jsonable(p.default_value)
    return out


def _method(m: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": m.name,
        "parameters": [
            {"name": prm.name, "type": type_name(prm.type)}
            | ({"default": _jsonable(prm.default_value)} if prm.default_value is not None else {})
            for prm in m.parameters
        ],
        "returns": type_name(m.type),
    }
    if m.is_abstract:
        out["is_abstract"] = True
    if getattr(m, "visibility", "public") != "public":
        out["visibility"] = m.visibility
    if m.code:
        out["code"] = m.code
    implementation = getattr(m.implementation_type, "value", None) or "none"
    if implementation != ("code" if m.code else "none"):  # only when auto-detection would differ
        out["implementation"] = implementation
    conditions = {
        "pre": sorted(_constraint(c) for c in (m.pre or [])),
        "post": sorted(_constraint(c) for c in (m.post or [])),
    }
    out.update({k: [dict(c) for c in v] for k, v in conditions.items() if v})
    return out


def _constraint(c: Any) -> tuple:
    # A tuple so it sorts; turned into a dict by the caller.
    return (("name", c.name), ("context", type_name(c.context)), ("expression", c.expression), ("language", c.language))


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def model_to_dict(model: DomainModel) -> dict[str, Any]:
    """The canonical JSON-ready dict of ``model`` (see the module docstring for what is kept)."""
    from besser.BUML.metamodel.structural import AssociationClass, Class, Enumeration

    enums, classes = [], []
    for t in model.types:
        if isinstance(t, Enumeration):
            enums.append({"name": t.name, "literals": sorted(lit.name for lit in t.literals)})
        elif isinstance(t, Class):
            entry: dict[str, Any] = {"name": t.name}
            if t.is_abstract:
                entry["is_abstract"] = True
            if isinstance(t, AssociationClass):
                entry["association"] = t.association.name
            entry["attributes"] = sorted((_property(a) for a in t.attributes), key=lambda d: d["name"])
            entry["methods"] = sorted((_method(m) for m in t.methods), key=lambda d: d["name"])
            classes.append(entry)
    associations = []
    for assoc in model.associations:
        ends = sorted((_property(e) for e in assoc.ends), key=lambda d: (d["name"], d["type"]))
        associations.append({"name": assoc.name, "ends": ends})
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": model.name,
        "enumerations": sorted(enums, key=lambda d: d["name"]),
        "classes": sorted(classes, key=lambda d: d["name"]),
        "associations": sorted(associations, key=lambda d: (d["name"], [e["name"] for e in d["ends"]])),
        "generalizations": sorted(
            ({"general": g.general.name, "specific": g.specific.name} for g in model.generalizations),
            key=lambda d: (d["specific"], d["general"]),
        ),
        "constraints": [dict(c) for c in sorted(_constraint(c) for c in model.constraints)],
    }


def dumps(model: DomainModel, *, indent: int | None = 2) -> str:
    return json.dumps(model_to_dict(model), indent=indent, ensure_ascii=False)


def model_digest(model: DomainModel) -> str:
    """sha256 of the canonical form: same structure, same digest, whatever the notation."""
    text = json.dumps(model_to_dict(model), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- dict -> model --------------------------------------------------------------------------


def loads(text: str | bytes) -> Any:
    try:
        data = safejson.loads(text)
    except safejson.JsonTooDeep as exc:
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"the JSON is nested too deeply to be a model document ({exc})") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"the file is not JSON: {exc}") from None
    return model_from_dict(data)


def parse_multiplicity(text: str, where: str) -> Any:
    from besser.BUML.metamodel.structural import Multiplicity

    low, sep, high = str(text).partition("..")
    try:
        lo = int(low)
        hi: int | str = lo if not sep else ("*" if high.strip() == "*" else int(high))
        return Multiplicity(lo, hi)
    except ValueError:
        raise ToolFailure(ErrorCode.INVALID_MODEL, f"{where}: multiplicity {text!r} is not 'min..max'") from None


def model_from_dict(data: Any) -> DomainModel:
    """Rebuild a ``DomainModel``; a wrong format is ``not_a_model``, a dangling name ``invalid_model``."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"the JSON is not a {FORMAT} document (missing or wrong 'format')")
    if data.get("version") != VERSION:
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"unsupported {FORMAT} version {data.get('version')!r}; expected {VERSION}")
    _check_size(data)
    _check_inheritance(data)
    try:
        return _build(data)
    except ToolFailure:
        raise
    except (RecursionError, MemoryError) as exc:
        raise ToolFailure(ErrorCode.TOO_LARGE, f"the model document needs more than a model may use ({type(exc).__name__})") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"malformed model document: {type(exc).__name__}: {exc}") from None
    except ValueError as exc:  # BESSER's own checks (duplicate names, bad multiplicities)
        raise ToolFailure(ErrorCode.INVALID_MODEL, str(exc)) from None


def _check_size(data: dict[str, Any]) -> None:
    """Refuse (``too_large``) a document with more elements or longer texts than a model may have."""
    count = 0

    def entries(owner: Any, key: str) -> list[Any]:
        nonlocal count
        value = owner.get(key, []) if isinstance(owner, dict) else []
        items = value if isinstance(value, list) else []
        count += len(items)
        if count > MAX_ELEMENTS:
            raise ToolFailure(ErrorCode.TOO_LARGE, f"the model document has more than {MAX_ELEMENTS} elements")
        return items

    def text(owner: Any, key: str, where: str) -> None:
        value = owner.get(key) if isinstance(owner, dict) else None
        if isinstance(value, (list, dict)):
            raise ToolFailure(ErrorCode.INVALID_MODEL, f"{where}: {key!r} must be a string, number or boolean")
        if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
            raise ToolFailure(ErrorCode.TOO_LARGE, f"{where}: {key!r} is longer than {MAX_TEXT_CHARS} characters")

    for enum in entries(data, "enumerations"):
        entries(enum, "literals")
    for cls in entries(data, "classes"):
        for attribute in entries(cls, "attributes"):
            text(attribute, "default", "an attribute")
        for method in entries(cls, "methods"):
            text(method, "code", "a method")
            for parameter in entries(method, "parameters"):
                text(parameter, "default", "a parameter")
            for kind in ("pre", "post"):
                for rule in entries(method, kind):
                    text(rule, "expression", "a method condition")
    for association in entries(data, "associations"):
        for end in entries(association, "ends"):
            text(end, "default", "an association end")
    entries(data, "generalizations")
    for rule in entries(data, "constraints"):
        text(rule, "expression", "a constraint")


def _check_inheritance(data: dict[str, Any]) -> None:
    """Bound the inheritance graph by name before BESSER builds (and walks) it (``inheritance.py``)."""
    from kernel_ext.model.inheritance import bound_names

    entries = data.get("generalizations", [])
    edges = [
        (g["specific"], g["general"])
        for g in (entries if isinstance(entries, list) else [])
        if isinstance(g, dict) and isinstance(g.get("specific"), str) and isinstance(g.get("general"), str)
    ]
    bound_names(edges, origin="the model document")


def _build(data: dict[str, Any]) -> Any:
    from besser.BUML.metamodel import structural as s

    primitives = {t.name: t for t in (s.StringType, s.IntegerType, s.FloatType, s.BooleanType, s.TimeType,
                                      s.DateType, s.DateTimeType, s.TimeDeltaType, s.AnyType)}
    types: dict[str, Any] = dict(primitives)
    for e in data.get("enumerations", []):
        types[e["name"]] = s.Enumeration(name=e["name"], literals={s.EnumerationLiteral(name=n) for n in e["literals"]})
    class_entries = data.get("classes", [])
    for c in class_entries:
        if "association" not in c:
            types[c["name"]] = s.Class(name=c["name"], is_abstract=bool(c.get("is_abstract", False)))

    def resolve(name: str | None, where: str) -> Any:
        if name is None:
            return None
        if name not in types:
            raise ToolFailure(ErrorCode.INVALID_MODEL, f"{where}: unknown type {name!r}")
        return types[name]

    def prop(entry: dict[str, Any], where: str) -> Any:
        flags = {flag: bool(entry.get(flag, default)) for flag, default in _PROPERTY_FLAGS.items()}
        return s.Property(
            name=entry["name"],
            type=resolve(entry["type"], f"{where}.{entry['name']}"),
            multiplicity=parse_multiplicity(entry.get("multiplicity", "1..1"), f"{where}.{entry['name']}"),
            visibility=entry.get("visibility", "public"),
            default_value=entry.get("default"),
            **flags,
        )

    associations: dict[str, Any] = {}
    for a in data.get("associations", []):
        associations[a["name"]] = s.BinaryAssociation(
            name=a["name"], ends={prop(e, f"association {a['name']}") for e in a["ends"]}
        )
    for c in class_entries:
        if "association" in c:
            assoc = associations.get(c["association"])
            if assoc is None:
                raise ToolFailure(ErrorCode.INVALID_MODEL, f"association class {c['name']!r}: unknown association {c['association']!r}")
            types[c["name"]] = s.AssociationClass(name=c["name"], attributes=set(), association=assoc)
            types[c["name"]].is_abstract = bool(c.get("is_abstract", False))

    def constraint(entry: dict[str, Any], where: str) -> Any:
        return s.Constraint(
            name=entry["name"],
            context=resolve(entry["context"], where),
            expression=entry["expression"],
            language=entry.get("language", "OCL"),
        )

    for c in class_entries:
        cls = types[c["name"]]
        cls.attributes = {prop(a, c["name"]) for a in c.get("attributes", [])}
        for m in c.get("methods", []):
            where = f"{c['name']}.{m['name']}"
            method = s.Method(
                name=m["name"],
                visibility=m.get("visibility", "public"),
                is_abstract=bool(m.get("is_abstract", False)),
                parameters=[
                    s.Parameter(name=p["name"], type=resolve(p["type"], f"{where}({p['name']})"), default_value=p.get("default"))
                    for p in m.get("parameters", [])
                ],
                type=resolve(m.get("returns"), where),
                code=m.get("code", ""),
                implementation_type=s.MethodImplementationType(m["implementation"]) if "implementation" in m else None,
            )
            for kind in ("pre", "post"):
                for entry in m.get(kind, []):
                    getattr(method, f"add_{kind}")(constraint(entry, f"{where} {kind}"))
            cls.add_method(method)

    model_types = {t for name, t in types.items() if name not in primitives}
    return s.DomainModel(
        name=data.get("name") or "DomainModel",
        types=model_types,
        associations=set(associations.values()),
        generalizations={
            s.Generalization(general=resolve(g["general"], "generalization"), specific=resolve(g["specific"], "generalization"))
            for g in data.get("generalizations", [])
        },
        constraints={constraint(c, f"constraint {c.get('name')}") for c in data.get("constraints", [])},
    )
