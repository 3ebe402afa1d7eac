"""IPython magics: ``%besser`` (runs, models, config) and ``%%test_api``.

``register`` is all ``%load_ext kernel_ext`` does; the backends, httpx, pydantic and
ipywidgets are imported by the first command that needs them, so loading stays fast.
"""

from __future__ import annotations

from typing import Any


def register(ipython: Any) -> None:
    from kernel_ext.magics.commands import BesserMagics

    ipython.register_magics(BesserMagics)


def unregister(ipython: Any) -> None:
    magics = ipython.magics_manager.magics
    magics["line"].pop("besser", None)
    magics["cell"].pop("test_api", None)
