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

from kernel_ext.lazy import lazy_exports

_EXPORTS = {
    "Shell": "shell",
    "RunRequest": "options",
    "SandboxOptions": "options",
    "Expect": "options",
    "BackgroundJob": "jobs",
    "BackgroundJobs": "jobs",
    "RecordStore": "records",
    "CheckpointStore": "checkpoints",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kernel_ext.sandbox.shtools",
                                    {name: f"kernel_ext.sandbox.shtools.{module}" for name, module in _EXPORTS.items()})
