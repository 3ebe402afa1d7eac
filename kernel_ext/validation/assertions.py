"""What a request expects: a status (or one of several) and JSON fields at dotted paths.

Expected values are compared as JSON values (``1 == 1.0``, ``True`` is not ``1``); an
expected value may itself be a reference (``{{0.library.id}}``), resolved before comparing.
Standard library only: evaluated in the sandboxed child on the full, unredacted response.
"""

from __future__ import annotations

from typing import Any

from kernel_ext.validation.references import MISSING, ReferenceFailure, Responses, parse_steps, resolve_value, walk


def status_check(expected: Any, status: int | None) -> dict[str, Any] | None:
    if expected is None:
        return None
    allowed = expected if isinstance(expected, list) else [expected]
    ok = status is not None and status in allowed
    shown = allowed[0] if len(allowed) == 1 else allowed
    return {"path": "status", "expected": shown, "actual": status, "ok": ok,
            "message": "" if ok else f"expected status {shown}, got {status}"}


def same(expected: Any, actual: Any) -> bool:
    """JSON equality: booleans never equal numbers, numbers compare by value, containers deeply."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected is actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return expected == actual
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(same(e, a) for e, a in zip(expected, actual, strict=False))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(same(v, actual[k]) for k, v in expected.items())
    return type(expected) is type(actual) and expected == actual


def field_checks(expected_fields: dict[str, Any] | None, body: Any, responses: Responses, current: int) -> list[dict[str, Any]]:
    """One result per expected field: ``{path, expected, actual, ok, message}``."""
    out: list[dict[str, Any]] = []
    for path, raw_expected in (expected_fields or {}).items():
        try:
            expected = resolve_value(raw_expected, responses, current)
        except ReferenceFailure as exc:
            out.append({"path": path, "expected": raw_expected, "actual": None, "ok": False, "message": str(exc)})
            continue
        if body is MISSING:
            out.append({"path": path, "expected": expected, "actual": None, "ok": False,
                        "message": "the response has no JSON body"})
            continue
        try:
            actual, reason = walk(body, parse_steps(path))
        except ReferenceFailure as exc:
            actual, reason = MISSING, str(exc)
        if actual is MISSING:
            out.append({"path": path, "expected": expected, "actual": None, "ok": False, "message": f"missing: {reason}"})
            continue
        ok = same(expected, actual)
        out.append({"path": path, "expected": expected, "actual": actual, "ok": ok,
                    "message": "" if ok else f"expected {expected!r}, got {actual!r}"})
    return out
