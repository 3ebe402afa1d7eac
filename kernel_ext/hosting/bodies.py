"""Which body runs a kind of run: the one seam between hosting and the agent.

Hosting starts, follows, stores and recovers runs without knowing how a run thinks; the code
that thinks (the orchestrator, an authored scenario) sits above it and imports hosting, never
the reverse. So each kind names its body factory by import path (``module:function``), resolved
when a run starts, the way Jupyter configures classes by name. No module of hosting, server/ or
magics/ imports the agent package; tests/test_layers_hosting.py checks that by reading imports.

A factory takes the validated request and the operator's settings and returns a ``RunBody``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from kernel_ext.hosting.options import OperatorSettings, RunRequest
from kernel_ext.hosting.requests import KINDS, HostedRequest, capped, hold_named_files, kind_of
from kernel_ext.hosting.run import RunBody

BodyFactory = Callable[[Any, OperatorSettings], RunBody]

RUN_BODIES: Mapping[str, str] = MappingProxyType({
    "generate": "kernel_ext.pipeline.generation:generation_body",
    "scenario": "kernel_ext.scenarios.side_effects_run:scenario_body",
})
assert set(RUN_BODIES) == set(KINDS), "every kind a request may name has a body"


def body_factory(kind: str, bodies: Mapping[str, str] = RUN_BODIES) -> BodyFactory:
    """The factory ``bodies`` names for ``kind``, imported now."""
    module, _, name = bodies[kind].partition(":")
    factory: BodyFactory = getattr(importlib.import_module(module), name)
    return factory


def resolve_body(request: HostedRequest, operator: OperatorSettings, bodies: Mapping[str, str] = RUN_BODIES) -> RunBody:
    """The run body for ``request``: every file it names is held and budgets capped first, so a
    refusal (``RequestRefused``) comes before a run folder exists."""
    if isinstance(request, RunRequest):
        hold_named_files(request, operator)
        request = capped(request, operator)
    return body_factory(kind_of(request), bodies)(request, operator)


def preload(bodies: Mapping[str, str] = RUN_BODIES) -> None:
    """Import every body's module now (the server's start-up), not on the first run's request,
    and run its ``warm_up()`` where it has one (what its runs import and build once per process:
    otherwise the first runs pay for it on the server's loop)."""
    for kind in bodies:
        module, _, _name = bodies[kind].partition(":")
        body_factory(kind, bodies)
        warm_up = getattr(importlib.import_module(module), "warm_up", None)
        if callable(warm_up):
            warm_up()
