"""Python model files, evaluated by walking their syntax tree: nothing is ever ``exec``-ed.

BESSER's allow-listed loader (``parse_buml_content``) lives in its web-editor backend, which a
plain ``pip install besser`` cannot import (it needs ``deep_translator``), and it still runs
``exec``. This evaluator understands the subset model files use (the form BESSER's
``domain_model_to_code`` writes, and what people type in a notebook cell): imports, plain and
annotated assignments, calls of the B-UML constructors, a short list of B-UML methods
(``add_method``, ``add_type``...), attribute assignment on B-UML objects, literals and
collections. Anything else is refused with ``unsafe_model_source`` naming the line.

Work and memory are bounded: source size, expressions evaluated, calls, the length of built
strings and the expanded size of collections (``t = (t, t)`` repeated would otherwise cost
exponential time to hash), the bytes of every value the evaluator builds, summed over the whole
file (each string under its cap, thousands of ``b = a + "1"`` would still hold gigabytes), and
CPU time (thousands of ``add_type`` calls cost quadratic time in BESSER itself), each with a
named ``too_large``; a ``MemoryError`` or
``RecursionError`` that still escapes is ``too_large`` too, never a traceback.

Names imported from other modules (generators, ``os``...) and top-level ``def``/``class``
are opaque: a statement that uses one is skipped, never evaluated, and reported. The
``if __name__ == "__main__":`` block is skipped too (it would not run on import either).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.model.eval_budget import EvalBudget
from kernel_ext.model.pysource import iter_statements
from kernel_ext.safetext import article

# Bounds on the work and memory one model file may cost (each exceeded: ``too_large``, named;
# the counted ones are in eval_budget).
MAX_SOURCE_BYTES = 1024 * 1024
MAX_DEPTH = 100            # expression nesting
_ALLOWED_MODULES = ("besser.BUML.metamodel.structural", "besser.BUML.metamodel")

# B-UML methods a model file may call, and attributes it may assign.
_CALLABLE = frozenset(
    {"add_method", "add_attribute", "add_literal", "add_parameter", "add_type", "add_association",
     "add_generalization", "add_constraint", "add_pre", "add_post"}
)
_SETTABLE = frozenset(
    {"name", "attributes", "methods", "code", "literals", "ends", "types", "associations", "generalizations",
     "constraints", "is_abstract", "is_read_only", "implementation_type", "multiplicity", "is_id", "is_optional",
     "is_external_id", "type", "parameters", "visibility", "default_value", "is_composite", "is_navigable",
     "description", "metadata", "pre", "post", "expression", "language", "context", "general", "specific",
     "is_disjoint", "is_complete"}
)


class _Opaque:
    """A name bound outside the allowlist: any statement touching it is skipped."""

    def __init__(self, origin: str):
        self.origin = origin


class _Namespace:
    """A read-only bag of allowed members (``datetime.datetime.fromisoformat``)."""

    def __init__(self, name: str, members: dict[str, Any]):
        self.name = name
        self.members = members


class _Skip(Exception):
    pass


@dataclass
class SafeResult:
    namespace: dict[str, Any]
    order: list[str] = field(default_factory=list)   # names in assignment order
    skipped: list[str] = field(default_factory=list)  # "line N: why"


def _allowlist() -> tuple[dict[str, Any], frozenset[int]]:
    import datetime as _dt

    from besser.BUML.metamodel import structural as s

    names = [
        "Class", "Property", "Method", "Parameter", "PrimitiveDataType", "BinaryAssociation", "Association",
        "AssociationClass", "Generalization", "GeneralizationSet", "Enumeration", "EnumerationLiteral",
        "Multiplicity", "Constraint", "DomainModel", "Metadata", "MethodImplementationType",
        "UNLIMITED_MAX_MULTIPLICITY", "StringType", "IntegerType", "FloatType", "BooleanType", "TimeType",
        "DateType", "DateTimeType", "TimeDeltaType", "AnyType",
    ]
    allowed: dict[str, Any] = {n: getattr(s, n) for n in names if hasattr(s, n)}
    dt = _Namespace("datetime", {
        "datetime": _Namespace("datetime.datetime", {"fromisoformat": _dt.datetime.fromisoformat}),
        "date": _Namespace("datetime.date", {"fromisoformat": _dt.date.fromisoformat}),
        "timezone": _Namespace("datetime.timezone", {"utc": _dt.UTC}),
    })
    allowed.update({"datetime": dt, "set": set, "list": list, "dict": dict, "tuple": tuple})
    constructors = {id(v) for k, v in allowed.items() if isinstance(v, type) and k != "MethodImplementationType"}
    constructors |= {id(dt.members["datetime"].members["fromisoformat"]), id(dt.members["date"].members["fromisoformat"])}
    return allowed, frozenset(constructors)


def evaluate_source(text: str, *, source: str = "model file") -> SafeResult:
    """Evaluate ``text`` under the rules above and return the names it bound."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
        raise ToolFailure(ErrorCode.TOO_LARGE, f"{source} is larger than {MAX_SOURCE_BYTES} bytes")
    # Short parses, one statement at a time, evaluated as they come: the GIL changes hands often
    # and no whole-file tree lives on (pysource.py).
    statements = iter_statements(text.lstrip("\ufeff"), source)
    try:
        return _Evaluator(source).run(statements)
    except (RecursionError, MemoryError) as exc:
        raise ToolFailure(ErrorCode.TOO_LARGE, f"{source} needs more than a model file may use ({type(exc).__name__})") from None


class _Evaluator:
    def __init__(self, source: str):
        from besser.BUML.metamodel.structural import Element, Generalization, MethodImplementationType

        self.source = source
        self.allowed, self.constructors = _allowlist()
        self.element = Element
        self.generalization = Generalization
        self.impl_enum = MethodImplementationType
        self.result = SafeResult(namespace=dict(self.allowed))
        self.line = 0
        self.budget = EvalBudget(source)

    # -- statements ---------------------------------------------------------------------------

    def run(self, statements: Iterable[ast.stmt]) -> SafeResult:
        for stmt in statements:
            self.line = self.budget.line = stmt.lineno
            try:
                self._statement(stmt)
            except _Skip as why:
                self.result.skipped.append(f"line {stmt.lineno}: {why}")
                self._taint(stmt)
            except ToolFailure:
                raise
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                raise ToolFailure(
                    ErrorCode.INVALID_MODEL, f"{self.source} line {stmt.lineno}: {type(exc).__name__}: {exc}"
                ) from None
        return self.result

    def _statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                bound = alias.asname or alias.name.split(".")[0]
                if alias.name == "datetime":
                    self._bind(bound, self.allowed["datetime"])
                else:
                    self._bind(bound, _Opaque(f"import {alias.name}"))
                    self.result.skipped.append(f"line {stmt.lineno}: import of {alias.name!r} not evaluated")
        elif isinstance(stmt, ast.ImportFrom):
            module = stmt.module or ""
            allowed_module = module in _ALLOWED_MODULES
            for alias in stmt.names:
                if alias.name == "*":
                    if not allowed_module:
                        self.result.skipped.append(f"line {stmt.lineno}: 'from {module} import *' not evaluated")
                    continue
                bound = alias.asname or alias.name
                if allowed_module and alias.name in self.allowed:
                    self._bind(bound, self.allowed[alias.name])
                else:
                    self._bind(bound, _Opaque(f"from {module} import {alias.name}"))
                    self.result.skipped.append(f"line {stmt.lineno}: import of {alias.name!r} from {module!r} not evaluated")
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._bind(stmt.name, _Opaque(f"def {stmt.name}"))
            self.result.skipped.append(f"line {stmt.lineno}: definition of {stmt.name!r} not evaluated")
        elif isinstance(stmt, ast.Assign):
            value = self._eval(stmt.value, 0)
            for target in stmt.targets:
                self._assign(target, value)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self._assign(stmt.target, self._eval(stmt.value, 0))
        elif isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant):
                return  # a docstring or a bare literal
            if not isinstance(stmt.value, ast.Call):
                self._refuse(stmt, "a bare expression")
            self._eval(stmt.value, 0)
        elif isinstance(stmt, ast.If) and _is_main_guard(stmt.test):
            self.result.skipped.append(f"line {stmt.lineno}: 'if __name__ == \"__main__\"' block not evaluated")
        elif isinstance(stmt, ast.Pass):
            return
        else:
            self._refuse(stmt, article(f"{type(stmt).__name__.lower()} statement"))

    def _taint(self, stmt: ast.stmt) -> None:
        """Names a skipped statement would have bound become opaque too."""
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name):
                self._bind(target.id, _Opaque(f"skipped line {stmt.lineno}"))

    def _bind(self, name: str, value: Any) -> None:
        self.result.namespace[name] = value
        if name in self.result.order:
            self.result.order.remove(name)
        self.result.order.append(name)

    def _assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, value)
            return
        if isinstance(target, ast.Attribute):
            owner = self._eval(target.value, 1)
            if not isinstance(owner, self.element) or target.attr not in _SETTABLE:
                self._refuse(target, f"assigning {target.attr!r} on {type(owner).__name__}")
            if isinstance(owner, self.generalization) and target.attr in ("general", "specific"):
                ends = {"general": _field(owner, "general"), "specific": _field(owner, "specific"), target.attr: value}
                self._bound_inheritance(target, ends["general"], ends["specific"])
            setattr(owner, target.attr, value)
            return
        self._refuse(target, "this assignment target")

    # -- expressions --------------------------------------------------------------------------

    def _eval(self, node: ast.expr, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self._refuse(node, "an expression nested this deeply")
        self.budget.step(node)
        d = depth + 1
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in self.result.namespace:
                raise ToolFailure(ErrorCode.NOT_A_MODEL, f"{self.source} line {node.lineno}: name {node.id!r} is not defined")
            value = self.result.namespace[node.id]
            if isinstance(value, _Opaque):
                raise _Skip(f"uses {node.id!r} ({value.origin}), not evaluated")
            return value
        if isinstance(node, ast.Attribute):
            value = self._attribute(node, d)
            if callable(value) and not isinstance(value, type):
                self._refuse(node, f"reading the method {node.attr!r} without calling it")
            return value
        if isinstance(node, ast.Call):
            return self._call(node, d)
        if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                self._refuse(node, "star-unpacking")
            items = [self._eval(e, d) for e in node.elts]
            self.budget.weigh(node, items)  # before a set hashes them
            return self.budget.weighed(node, {ast.Set: set, ast.List: list, ast.Tuple: tuple}[type(node)](items), items)
        if isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]
            if len(keys) != len(node.keys):
                self._refuse(node, "'**' in a dict literal")
            pairs = [(self._eval(k, d), self._eval(v, d)) for k, v in zip(keys, node.values, strict=True)]
            flat = [x for pair in pairs for x in pair]
            self.budget.weigh(node, flat)
            return self.budget.weighed(node, dict(pairs), flat)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self._eval(node.operand, d)
            if isinstance(operand, (int, float)) and not isinstance(operand, bool):
                return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._eval(node.left, d), self._eval(node.right, d)
            if isinstance(left, str) and isinstance(right, str):
                return self.budget.joined(node, left, right)
            if isinstance(left, (int, float)) and isinstance(right, (int, float)):
                return self.budget.charged(node, left + right)
        self._refuse(node, article(f"{type(node).__name__} expression"))

    def _attribute(self, node: ast.Attribute, depth: int) -> Any:
        if node.attr.startswith("_"):
            self._refuse(node, f"the private attribute {node.attr!r}")
        base = self._eval(node.value, depth)
        if isinstance(base, _Namespace):
            if node.attr not in base.members:
                self._refuse(node, f"{base.name}.{node.attr}")
            return base.members[node.attr]
        if base is self.impl_enum:
            return self.impl_enum[node.attr]
        if isinstance(base, self.element):
            return getattr(base, node.attr)
        self._refuse(node, f"attribute {node.attr!r} of {type(base).__name__}")

    def _call(self, node: ast.Call, depth: int) -> Any:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            self._refuse(node, "'*' or '**' arguments")
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _CALLABLE:
            owner = self._eval(func.value, depth)
            if not isinstance(owner, self.element):
                self._refuse(node, f"calling {func.attr!r} on {type(owner).__name__}")
            target = getattr(owner, func.attr)
        else:
            target = (self._eval(func, depth) if isinstance(func, ast.Name)
                      else self._attribute(func, depth) if isinstance(func, ast.Attribute) else None)
            if id(target) not in self.constructors:
                self._refuse(node, f"calling {ast.unparse(func)!r}")
        args = [self._eval(a, depth) for a in node.args]
        kwargs = {k.arg: self._eval(k.value, depth) for k in node.keywords if k.arg is not None}  # '**' was refused
        self.budget.call(node)
        arguments = [*args, *kwargs.values()]
        self.budget.weigh(node, arguments)  # set(...), tuple(...) or a constructor would hash or copy them
        # A constructor may copy the collections it is given: they count again.
        self.budget.charge(node, sum(sys.getsizeof(a) for a in arguments if isinstance(a, (list, tuple, set, frozenset, dict))))
        if target is self.generalization:
            self._bound_inheritance(node, kwargs.get("general", args[0] if args else None),
                                    kwargs.get("specific", args[1] if len(args) > 1 else None))
        result = target(*args, **kwargs)
        self.budget.step(node)
        collection = isinstance(result, (list, tuple, set, frozenset, dict))
        return self.budget.weighed(node, result, arguments) if collection else self.budget.charged(node, result)

    # -- bounds -------------------------------------------------------------------------------

    def _bound_inheritance(self, node: ast.AST, general: Any, specific: Any) -> None:
        """Before BESSER's Generalization setters walk ``all_parents``: the graph with the new edge is bounded."""
        from kernel_ext.model.inheritance import bound_classes

        if not hasattr(general, "generalizations"):
            return  # BESSER refuses a missing or wrong general itself
        # BESSER's setters walk the ancestors of both ends and the descendants of the specific one.
        edge = (specific, general) if hasattr(specific, "generalizations") else None
        bound_classes([general, *(edge[:1] if edge else ())], extra=edge, down_from=edge[:1] if edge else (),
                      origin=f"{self.source} line {getattr(node, 'lineno', self.line)}")

    def _refuse(self, node: ast.AST, what: str) -> NoReturn:
        line = getattr(node, "lineno", self.line)
        raise ToolFailure(
            ErrorCode.UNSAFE_MODEL_SOURCE,
            f"{self.source} line {line}: {what} is outside what the safe model loader evaluates; "
            "build the model with plain assignments and B-UML constructors (the form BESSER's "
            "domain_model_to_code writes), or pass the DomainModel object itself",
        )


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _field(owner: Any, name: str) -> Any:
    try:
        return getattr(owner, name)
    except AttributeError:  # a Generalization not fully built
        return None
