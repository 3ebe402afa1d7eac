"""The ``sh_*`` toolkit: ``Shell``, the shell tools as plain Python for the agent and a notebook.

Each ``sh_run`` gets a fresh sandbox of its own confinement (``runner``, ``options``: what a
caller may ask), background commands are polled by byte cursor (``jobs``), every command is a
stored record (``records``) read back without running again (``views``, ``condense``), its
result is quiet by default (``results``), what it changed comes from tree metadata
(``effects``), ``trace`` runs it under ``strace``, and ``checkpoints`` copy and restore the
project. Built on the confinement core and the run's session service one and two levels
down; nothing below imports this package. Imports are lazy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_ext.lazy import lazy_exports

if TYPE_CHECKING:  # the real types for a type checker; at run time each name is imported on first use
    from kernel_ext.sandbox.shtools.checkpoints import CheckpointStore
    from kernel_ext.sandbox.shtools.jobs import BackgroundJob, BackgroundJobs, signal_name
    from kernel_ext.sandbox.shtools.options import MAX_COMMAND_CHARS, Expect, SandboxOptions, ShRunRequest
    from kernel_ext.sandbox.shtools.records import RecordStore
    from kernel_ext.sandbox.shtools.results import render, succeeded
    from kernel_ext.sandbox.shtools.shell import Shell


_EXPORTS = {
    "Shell": "shell",
    "ShRunRequest": "options",
    "SandboxOptions": "options",
    "Expect": "options",
    "BackgroundJob": "jobs",
    "BackgroundJobs": "jobs",
    "RecordStore": "records",
    "CheckpointStore": "checkpoints",
    "MAX_COMMAND_CHARS": "options",
    "render": "results",
    "succeeded": "results",
    "signal_name": "jobs",
}

__all__ = [
    "MAX_COMMAND_CHARS",
    "BackgroundJob",
    "BackgroundJobs",
    "CheckpointStore",
    "Expect",
    "RecordStore",
    "SandboxOptions",
    "ShRunRequest",
    "Shell",
    "render",
    "signal_name",
    "succeeded",
]

__getattr__, __dir__ = lazy_exports("kernel_ext.sandbox.shtools",
                                    {name: f"kernel_ext.sandbox.shtools.{module}" for name, module in _EXPORTS.items()})
