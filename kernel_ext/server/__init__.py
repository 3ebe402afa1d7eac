"""The Jupyter server extension: REST + SSE handlers, their auth, and the run archive.

Runs themselves are hosted by ``kernel_ext.hosting`` (Jupyter-free, shared with the magics'
in-process path); this package is transport and auth around it, and imports hosting only,
never the agent. Only ``app``, ``auth`` and ``handlers`` import jupyter_server.
"""
