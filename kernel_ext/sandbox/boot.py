"""The command line that runs one of this package's own programs inside a sandbox.

A sandbox shows the interpreter and this package's folder read-only, with ``-I`` (no
environment paths, no user site, no script folder on ``sys.path``). So the program is started
by a boot line that loads ``kernel_ext`` from its own folder (the only part of its parent a
sandbox shows or lets list), imports the named module and exits with its ``main(argv)``. The
app host (``validation.apphost.main``), the import checker (``tools.import_worker``) and
confined generators (``generation/confined.py``) start this way, through ``WarmWorker`` or
``run_confined``.
"""

from __future__ import annotations

import sys
from pathlib import Path

_BOOT = (
    "import importlib, importlib.util, os, sys; pkg = sys.argv[1]; "
    "spec = importlib.util.spec_from_file_location('kernel_ext', os.path.join(pkg, '__init__.py'), "
    "submodule_search_locations=[pkg]); module = importlib.util.module_from_spec(spec); "
    "sys.modules['kernel_ext'] = module; spec.loader.exec_module(module); "
    "sys.exit(importlib.import_module(sys.argv[2]).main(sys.argv[3:]))"
)


def package_program(module: str, *args: str, python: str | None = None) -> list[str]:
    """``argv`` running ``module.main(list(args))`` (``module`` under ``kernel_ext``) with ``python``
    (default: this interpreter)."""
    if not module.startswith("kernel_ext."):
        raise ValueError(f"not a module of this package: {module!r}")
    package = str(Path(__file__).resolve().parents[1])
    return [python or sys.executable, "-I", "-B", "-c", _BOOT, package, module, *args]
