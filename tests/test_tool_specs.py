"""Tool specs: schemas come from the arguments model; catalogs scope per run."""

from __future__ import annotations

import pytest

import boundary_fixtures
from kernel_ext.boundary.calls import MAX_OBSERVATION_CHARS, ToolResult, bound
from kernel_ext.tools.registry import ToolCatalog, default_catalog


def test_schema_comes_from_the_arguments_model():
    spec = {s.name: s for s in boundary_fixtures.TOOLS}["put"]
    schema = spec.json_schema()
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"path", "content", "tags"}
    assert set(schema["required"]) == {"path", "content"}
    assert schema["additionalProperties"] is False
    assert "title" not in schema and "title" not in schema["properties"]["path"]


def test_catalog_scoping_follows_services():
    catalog = ToolCatalog(boundary_fixtures.TOOLS)
    assert "sh" not in catalog.scoped({"workspace"}).names()
    assert "sh" in catalog.scoped({"workspace", "shell"}).names()
    assert "peek" not in catalog.scoped(set()).names()


def test_duplicate_names_are_rejected():
    with pytest.raises(ValueError):
        ToolCatalog([*boundary_fixtures.TOOLS, boundary_fixtures.TOOLS[0]])


def test_default_catalog_loads_and_is_unique():
    catalog = default_catalog()
    assert {"read_file", "write_file", "test_api", "query_class", "sh_run"} <= set(catalog.names())
    assert len(set(catalog.names())) == len(catalog)
    for spec in catalog:
        assert spec.description and spec.json_schema()["type"] == "object"


def test_observation_is_bounded_with_a_count():
    text = "x" * (MAX_OBSERVATION_CHARS * 3)
    result = ToolResult.success("c", "t", text)
    assert len(result.observation) <= MAX_OBSERVATION_CHARS + 100
    assert "characters cut" in result.observation
    assert bound("short") == "short"
