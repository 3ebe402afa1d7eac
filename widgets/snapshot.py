"""What a saved notebook keeps of a run: its output, re-published with the run's final state.

A ``RunView`` is displayed under a ``display_id`` of its own (``show``). The widget lives only
while a kernel does; the ``text/html`` and ``text/plain`` saved beside it are what GitHub,
nbviewer, nbconvert and a notebook opened without a kernel show. Once the run has ended, the
output is updated (``update_display_data``) with the final timeline, decisions, findings and
authorship, so a saved notebook shows the finished run, not its first "starting" frame.

A front end files an update under the cell that is executing when it arrives (JupyterLab and
nbclient ignore one whose cell has finished), so the update is sent from a cell's own context:
a cell awaiting the run (``RunView.wait``, the notebooks' ``answer_cards``), and the start of
every later cell (an IPython ``pre_run_cell`` hook). Nothing here raises into the kernel.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from typing import Any

log = logging.getLogger(__name__)

_shown: weakref.WeakSet[Any] = weakref.WeakSet()  # views displayed whose final state was not yet published
_hooked = False


def show(view: Any) -> None:
    """Display ``view`` (its whole mimebundle) under a fresh display id, remembered on the view."""
    from IPython.display import display

    display_id = uuid.uuid4().hex
    view.display_ids = [*getattr(view, "display_ids", []), display_id]
    display(view._repr_mimebundle_(), raw=True, display_id=display_id)
    if view.state.finished:
        return
    _shown.add(view)
    _hook()


def refresh(view: Any) -> bool:
    """Publish ``view``'s final state into every output it was displayed in (once it has ended)."""
    if view not in _shown or not view.state.finished:
        return False
    from IPython.display import update_display

    try:
        bundle = view._repr_mimebundle_()
        for display_id in getattr(view, "display_ids", []):
            update_display(bundle, raw=True, display_id=display_id)
    except Exception:  # a display that cannot be updated must not break the cell
        log.exception("could not update the saved output of run %s", view.state.run_id)
        return False
    _shown.discard(view)
    return True


def refresh_finished(*_info: Any) -> None:
    """Every displayed view that has ended since: the ``pre_run_cell`` hook."""
    for view in list(_shown):
        refresh(view)


def _hook() -> None:
    global _hooked
    if _hooked:
        return
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        return
    if shell is not None:
        shell.events.register("pre_run_cell", refresh_finished)
        _hooked = True
