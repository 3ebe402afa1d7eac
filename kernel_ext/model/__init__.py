"""B-UML in and out (Python, PlantUML, JSON), compact views and queries for the LLM.

Import-light on purpose: BESSER is imported by the functions that need it, so importing
``kernel_ext.model`` (or ``%load_ext kernel_ext``) does not pay for BESSER's metamodel.
Public names are resolved lazily from their modules.
"""

from __future__ import annotations

from kernel_ext.lazy import lazy_exports

_EXPORTS = {
    "LoadedModel": "kernel_ext.model.loading",
    "load": "kernel_ext.model.loading",
    "load_model": "kernel_ext.model.loading",
    "check_model": "kernel_ext.model.loading",
    "model_to_dict": "kernel_ext.model.jsonform",
    "model_from_dict": "kernel_ext.model.jsonform",
    "dumps": "kernel_ext.model.jsonform",
    "loads": "kernel_ext.model.jsonform",
    "model_digest": "kernel_ext.model.jsonform",
    "ModelIndex": "kernel_ext.model.index",
    "build_index": "kernel_ext.model.index",
    "model_index": "kernel_ext.model.service",
    "present_models": "kernel_ext.model.service",
    "overview": "kernel_ext.model.views",
    "describe_class": "kernel_ext.model.views",
    "select": "kernel_ext.model.predicates",
    "validate_report": "kernel_ext.model.checks",
    "ClassDiagram": "kernel_ext.model.diagram",
    "show": "kernel_ext.model.diagram",
    "render_svg": "kernel_ext.model.diagram",
    "render_text": "kernel_ext.model.diagram",
    "build_library_model": "kernel_ext.model.examples",
    "synthetic_model": "kernel_ext.model.examples",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports('kernel_ext.model', _EXPORTS)
