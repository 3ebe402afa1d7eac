"""A finished run handed in as a notebook (``%besser export``): read, shown, replayable offline.

``record`` reads what the run stored; ``sections`` writes the reading part (request, timeline,
decided calls, findings, request reports, authorship); ``rerun`` the runnable part (the model as
code, the recorded provider turns as a cassette, the offline re-run and its comparison);
``notebook`` assembles, cuts secrets and writes the file without loss. Imports are lazy.
"""

from __future__ import annotations

from kernel_ext.lazy import lazy_exports

_EXPORTS = {
    "ExportRefused": "record",
    "RunRecord": "record",
    "read_run": "record",
    "build_notebook": "notebook",
    "export_run": "notebook",
    "find_run": "notebook",
    "notebook_text": "notebook",
    "checked_text": "notebook",
    "target_path": "notebook",
    "write_notebook": "notebook",
}

__all__ = ["ExportRefused", "RunRecord", "build_notebook", "checked_text", "export_run", "find_run", "notebook_text", "read_run",
           "target_path", "write_notebook"]

__getattr__, __dir__ = lazy_exports(__name__, {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()})
