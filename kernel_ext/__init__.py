"""besser-jupyter-agent: a Jupyter-native spec-driven agent over BESSER's B-UML models.

Kept import-light on purpose: ``%load_ext kernel_ext`` must stay fast, so heavy parts
(BESSER, httpx, the server) are imported where they are used.
"""

from kernel_ext.version import __version__ as __version__


def _jupyter_server_extension_points() -> list[dict]:
    """The server extension (``jupyter server extension list`` shows it as ``kernel_ext``)."""
    from kernel_ext.server.app import BesserAgentApp

    return [{"module": "kernel_ext", "app": BesserAgentApp}]


def load_ipython_extension(ipython) -> None:
    """``%load_ext kernel_ext``: registers ``%besser`` and ``%%test_api`` (nothing heavy is imported)."""
    from kernel_ext.magics import register

    register(ipython)


def unload_ipython_extension(ipython) -> None:
    from kernel_ext.magics import unregister

    unregister(ipython)


def generate(model, request: str, **options):
    """Start a generation run (see ``kernel_ext.pipeline.generation.generate``); returns a Run."""
    from kernel_ext.pipeline.generation import generate as start

    return start(model, request, **options)
