"""Hosting runs without knowing how a run thinks: the handle, the events, the folder, the manager.

Everything a front end (the server extension, the magics, the command line) needs to start,
follow, approve into, list and recover a run lives here; what a run *does* is a body chosen by
kind in ``bodies`` (an import path resolved when a run starts), so nothing here imports the agent.
Imports are lazy (``%load_ext`` stays fast). The names most callers need:

- ``Run``, ``RunContext``, ``RunBody``, ``start_run``, ``load_finished`` (``run``);
- ``EventLog`` (``bus``), ``BaseEvent``, ``make_event`` (``events``), ``RunLayout`` (``layout``);
- ``RunRequest``, ``ScenarioRequest``, ``OperatorSettings`` (``options``);
- ``parse_request``, ``RequestRefused`` (``requests``), ``resolve_body`` (``bodies``);
- ``RunManager`` (``manager``), ``RunSummary`` (``summaries``).
"""

from __future__ import annotations

from kernel_ext.lazy import lazy_exports

_EXPORTS = {
    "Run": "run",
    "RunBody": "run",
    "RunContext": "run",
    "start_run": "run",
    "load_finished": "run",
    "EventLog": "bus",
    "BaseEvent": "events",
    "make_event": "events",
    "RunLayout": "layout",
    "RunRequest": "options",
    "ScenarioRequest": "options",
    "OperatorSettings": "options",
    "RequestRefused": "requests",
    "parse_request": "requests",
    "resolve_body": "bodies",
    "RunManager": "manager",
    "RunSummary": "summaries",
}

__all__ = [
    "BaseEvent",
    "EventLog",
    "OperatorSettings",
    "RequestRefused",
    "Run",
    "RunBody",
    "RunContext",
    "RunLayout",
    "RunManager",
    "RunRequest",
    "RunSummary",
    "ScenarioRequest",
    "load_finished",
    "make_event",
    "parse_request",
    "resolve_body",
    "start_run",
]

__getattr__, __dir__ = lazy_exports(__name__, {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()})
