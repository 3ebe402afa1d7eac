"""Minimal valid values for a JSON schema (an OpenAPI request body), for the create probe.

Only required properties are filled; a value respects the schema's type, format, enum,
bounds and lengths, and the bounds the domain model's OCL sets (passed in by the probe).
Fields that hold ids of other entities are filled by the caller (the probe knows which
entities exist); here they are reported as ``references``.
Standard library only: runs in the sandboxed child.
"""

from __future__ import annotations

from typing import Any

FORMATS = {
    "date": "2024-01-15",
    "date-time": "2024-01-15T10:30:00",
    "time": "10:30:00",
    "email": "probe@example.com",
    "uuid": "123e4567-e89b-42d3-a456-426614174000",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "duration": "P1D",
    "ipv4": "192.0.2.1",
}


class Schemas:
    """Resolves ``$ref`` against ``components/schemas`` of an OpenAPI document."""

    def __init__(self, openapi: dict[str, Any]):
        self.components = (openapi.get("components") or {}).get("schemas") or {}

    def resolve(self, schema: Any, depth: int = 0) -> dict[str, Any]:
        while isinstance(schema, dict) and "$ref" in schema and depth < 20:
            schema = self.components.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
            depth += 1
        if not isinstance(schema, dict):
            return {}
        if "allOf" in schema:
            merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
            for part in schema["allOf"]:
                part = self.resolve(part, depth + 1)
                merged["properties"].update(part.get("properties") or {})
                merged["required"] += list(part.get("required") or [])
                for key in ("enum", "format", "minimum", "maximum", "minLength", "maxLength"):
                    if key in part:
                        merged[key] = part[key]
                if part.get("type") and part.get("type") != "object":
                    merged["type"] = part["type"]
            return merged
        return schema

    def variant(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The first non-null variant of ``anyOf``/``oneOf`` (``Optional[X]`` is ``anyOf[X, null]``)."""
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [self.resolve(o) for o in schema[key]]
                usable = [o for o in options if o.get("type") != "null"]
                return usable[0] if usable else {"type": "null"}
        return schema

    def name_of(self, schema: Any) -> str:
        if isinstance(schema, dict) and "$ref" in schema:
            return str(schema["$ref"]).rsplit("/", 1)[-1]
        return ""


def minimal(schemas: Schemas, schema: Any, *, depth: int = 0, bounds: dict[str, Any] | None = None) -> Any:
    """A small valid value for ``schema``; ``bounds`` (the model's OCL ranges) narrow a number's."""
    resolved = schemas.variant(schemas.resolve(schema))
    if bounds:
        resolved = {**resolved, **bounds}
    if "const" in resolved:
        return resolved["const"]
    if resolved.get("enum"):
        return resolved["enum"][0]
    if "default" in resolved and resolved["default"] is not None:
        return resolved["default"]
    kind = resolved.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in resolved):
        if depth > 6:
            return {}
        props = resolved.get("properties") or {}
        return {name: minimal(schemas, props.get(name, {}), depth=depth + 1) for name in resolved.get("required") or []}
    if kind == "array":
        count = int(resolved.get("minItems") or 0)
        return [minimal(schemas, resolved.get("items") or {}, depth=depth + 1) for _ in range(count)]
    if kind == "integer":
        return int(_number(resolved, 1))
    if kind == "number":
        return float(_number(resolved, 1.0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "string" or kind is None:
        return _string(resolved)
    return None


def _number(schema: dict[str, Any], default: float) -> float:
    value = default
    if "minimum" in schema:
        value = max(value, schema["minimum"])
    if "exclusiveMinimum" in schema and isinstance(schema["exclusiveMinimum"], (int, float)):
        value = max(value, schema["exclusiveMinimum"] + 1)
    if "maximum" in schema:
        value = min(value, schema["maximum"])
    if "exclusiveMaximum" in schema and isinstance(schema["exclusiveMaximum"], (int, float)):
        value = min(value, schema["exclusiveMaximum"] - 1)
    return value


def _string(schema: dict[str, Any]) -> str:
    fmt = schema.get("format")
    if fmt in FORMATS:
        return FORMATS[fmt]
    text = "probe"
    low = int(schema.get("minLength") or 0)
    high = schema.get("maxLength")
    if len(text) < low:
        text = text + "x" * (low - len(text))
    if isinstance(high, int) and high >= 0:
        text = text[:high] or ("x" * max(low, 0))[:high]
    return text


def sample_for_type(name: str) -> Any:
    """A value for a parameter known only by its type name (``int``, ``str``, ``date``...)."""
    key = name.strip().lower()
    if key in ("int", "integer"):
        return 1
    if key in ("float", "number", "decimal"):
        return 1.0
    if key in ("bool", "boolean"):
        return True
    if key == "date":
        return FORMATS["date"]
    if key in ("datetime", "date-time"):
        return FORMATS["date-time"]
    if key == "time":
        return FORMATS["time"]
    return "probe"
