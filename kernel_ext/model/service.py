"""The ``domain_model`` service as tools see it: a model, indexed once per run.

A host installs ``services["domain_model"]`` as a ``DomainModel`` (what a notebook holds), a
``LoadedModel`` or a ready ``ModelIndex``; tools call ``model_index`` and get the index,
built on first use and kept in the run's state so every later question is a lookup.
Other B-UML models a generator may need are separate services (``gui_model`` ...);
``present_models`` names which kinds a run has.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kernel_ext.errors import ErrorCode, ToolFailure

# service name -> model kind, as generators declare what they need
MODEL_SERVICES = {"domain_model": "domain", "gui_model": "gui", "agent_model": "agent", "object_model": "object"}


def domain_model_of(service: Any) -> Any:
    """The ``DomainModel`` behind a service value (a model, a LoadedModel or a ModelIndex)."""
    from kernel_ext.model.index import ModelIndex
    from kernel_ext.model.loading import LoadedModel

    if isinstance(service, (LoadedModel, ModelIndex)):
        return service.model
    return service


def model_index(service: Any, state: Any = None) -> Any:
    """The index of the service's model, cached in ``state`` (a RunState) when given."""
    from kernel_ext.model.index import ModelIndex, build_index

    if isinstance(service, ModelIndex):
        return service
    model = domain_model_of(service)
    if model is None:
        raise ToolFailure(ErrorCode.TOOL_NOT_OFFERED, "this run has no domain model")
    if state is None:
        return build_index(model)
    cache = state.store("model.index", dict)
    entry = cache.get(id(model))
    if entry is None or entry[0] is not model:
        entry = (model, build_index(model))
        cache[id(model)] = entry
    return entry[1]


def present_models(services: dict[str, Any] | Iterable[str]) -> frozenset[str]:
    """Model kinds available: ``{"domain", "gui", ...}`` from service names or a services dict."""
    names = [k for k, v in services.items() if v is not None] if isinstance(services, dict) else list(services)
    return frozenset(MODEL_SERVICES[n] for n in names if n in MODEL_SERVICES)
