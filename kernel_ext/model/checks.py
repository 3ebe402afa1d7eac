"""``validate_model``: BESSER's own validation plus a parse of every OCL constraint.

BESSER's ``DomainModel.validate()`` checks structure (references, multiplicities,
inheritance cycles, name clashes) but not whether an OCL expression parses against the
model; its B-OCL parser (``parse_ocl``) does that, naming the offending property. Both
go into one bounded report: errors first, then warnings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernel_ext.errors import ToolFailure
from kernel_ext.model.inheritance import bound_model

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

MAX_ROWS = 40


def validate_report(model: DomainModel) -> tuple[str, dict[str, Any]]:
    from besser.BUML.metamodel.structural import DomainModel

    errors: list[str] = []
    warnings: list[str] = []
    if not isinstance(model, DomainModel):
        return f"not a DomainModel: {type(model).__name__}", {"valid": False, "errors": ["not a DomainModel"], "warnings": []}
    if not model.get_classes():
        errors.append("the model has no classes")
    try:
        bound_model(model)  # validate() walks all_parents: refuse an unbounded graph first
        result = model.validate(raise_exception=False)
        errors.extend(result.get("errors", []))
        warnings.extend(result.get("warnings", []))
    except ToolFailure as exc:  # nothing else may walk this model's inheritance
        data = {"valid": False, "errors": [exc.message], "warnings": [], "ocl_checked": 0}
        return f"model {model.name!r} is INVALID: {exc.message}", data
    except Exception as exc:  # noqa: BLE001 - the validator itself failed on this model
        errors.append(f"BESSER's validator failed: {type(exc).__name__}: {exc}")
    ocl_checked = 0
    for constraint, where in _all_constraints(model):
        if str(constraint.language).upper() != "OCL":
            continue
        ocl_checked += 1
        problem = _ocl_problem(constraint, model)
        if problem:
            errors.append(f"OCL {where} '{constraint.name}' does not parse: {problem}")
    valid = not errors
    lines = [
        f"model {model.name!r} is {'valid' if valid else 'INVALID'}: {len(errors)} errors, {len(warnings)} warnings, "
        f"{ocl_checked} OCL constraints parsed"
    ]
    for label, rows in (("error", errors), ("warning", warnings)):
        for row in rows[:MAX_ROWS]:
            lines.append(f"- {label}: {row[:600]}")
        if len(rows) > MAX_ROWS:
            lines.append(f"- ... {len(rows) - MAX_ROWS} more {label}s")
    data = {"valid": valid, "errors": errors[:MAX_ROWS * 5], "warnings": warnings[:MAX_ROWS * 5], "ocl_checked": ocl_checked}
    return "\n".join(lines), data


def _all_constraints(model: DomainModel):
    for constraint in sorted(model.constraints, key=lambda c: c.name):
        yield constraint, "invariant"
    for cls in sorted(model.get_classes(), key=lambda c: c.name):
        for method in sorted(cls.methods, key=lambda m: m.name):
            for kind in ("pre", "post"):
                for constraint in getattr(method, kind) or []:
                    yield constraint, f"{kind}condition of {cls.name}.{method.name}"


def _ocl_problem(constraint: Any, model: DomainModel) -> str | None:
    from besser.BUML.notations.ocl.api import parse_ocl

    context = constraint.context if constraint.context in model.get_classes() else None
    try:
        parse_ocl(constraint.expression, model, context)
    except Exception as exc:  # noqa: BLE001 - BOCLSyntaxError, ValueError, or a visitor error: all are findings
        return str(exc)[:400] or type(exc).__name__
    return None
