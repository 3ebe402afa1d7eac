"""The Jupyter server extension: a run manager, REST + SSE handlers, and their auth.

Import-light on purpose: ``kernel_ext.hosting.requests`` and ``kernel_ext.hosting.manager`` are
jupyter-free and shared with the in-process path of the magics; only ``app``, ``auth`` and
``handlers`` import jupyter_server.
"""
