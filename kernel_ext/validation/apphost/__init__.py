"""The warm app host: the generated app run for real, on both sides of the sandbox wall.

Host side (the server's process): ``host`` (``AppHost``: starts the host program confined,
stages source, sends jobs, reads replies) and ``ready`` (the server's ready host: one started
ahead of need, pristine, taken once by the next run, so a cold call finds the libraries imported).

Inside the sandbox (started by module name through ``sandbox.boot.package_program``; never
imported by the server): ``main`` (the host program: preloads, forks a child per job),
``child`` (one job: the app imported, its requests or probe run), ``exchange`` (one request
and its checks), ``probe`` (start-up, create and action probes), ``lifespan`` (the app's
start-up and shutdown, errors recorded) and ``warmup`` (imports done once before any job).

The two sides speak only length-prefixed JSON frames (``kernel_ext.sandbox.frames``) over
the host program's stdin and stdout. Imports are lazy.
"""

from __future__ import annotations

from kernel_ext.lazy import lazy_exports

_EXPORTS = {"AppHost": "host", "Staged": "host"}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kernel_ext.validation.apphost",
                                    {name: f"kernel_ext.validation.apphost.{module}" for name, module in _EXPORTS.items()})
