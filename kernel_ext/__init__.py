"""besser-jupyter-agent: a Jupyter-native spec-driven agent over BESSER's B-UML models.

Kept import-light on purpose: ``%load_ext kernel_ext`` must stay fast, so heavy parts
(BESSER, httpx, the server) are imported where they are used.
"""

__version__ = "0.1.0"
