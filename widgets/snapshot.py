"""What a saved notebook keeps of a run: a finished run as static HTML, a live one with a way back.

A widget lives only while its kernel does: JupyterLab and Notebook 7 render a saved widget output
first and, with its model gone (a restart and reload, a new server), show only "Error displaying
widget: model not found", never the ``text/html`` saved beside it. So:

- a view already finished when shown (``%besser attach`` of an ended run, a replay) is shown as
  static HTML and text only, no widget;
- a live view is shown under a display id of its own, and beside it a second output, the
  *reattach line* (``%besser attach RUN``), which a stylesheet in it hides while the output
  before it holds a rendered view, and which hides that output while it holds none (the "model
  not found" text); where the stylesheet is not applied (an untrusted notebook), the line shows;
- once the run has ended, both are updated (``update_display_data``): the view's output becomes
  the finished run's static HTML and text, exactly what nbconvert shows, and the line is emptied.

A front end applies an update only while the cell that made the output is still executing
(JupyterLab keeps display ids per cell run; nbclient and the classic notebook take them from any
cell), so a cell that awaits its own view (``widgets.lesson.answer_cards``, ``RunView.wait``)
keeps the finished run in the saved notebook everywhere; an update is also sent at the start of
every later cell (an IPython ``pre_run_cell`` hook) for the front ends that take it from there.
Nothing here raises into the kernel.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from typing import Any

from widgets.render import esc

log = logging.getLogger(__name__)

_shown: weakref.WeakSet[Any] = weakref.WeakSet()  # views displayed whose final state was not yet published
_hooked = False

REATTACH_CLASS = "besser-reattach"
# JupyterLab and Notebook 7 put each output in a ``.jp-OutputArea-child``: the view's, then the line's.
REATTACH_CSS = (
    "<style>"
    f".jp-OutputArea-child:has(.besser-run) + .jp-OutputArea-child:has(.{REATTACH_CLASS}){{display:none}}"
    f".jp-OutputArea-child:not(:has(.besser-run)):has(+ .jp-OutputArea-child .{REATTACH_CLASS}){{display:none}}"
    "</style>"
)


def reattach_line(run_id: str) -> str:
    run = run_id or "RUN"
    return (f"The live view of run {run} needs the kernel that showed it; to see the run again, "
            f"run %besser attach {run} in a cell.")


def reattach_bundle(run_id: str) -> dict[str, str]:
    """The output shown beside a live view: visible only when the view itself cannot render."""
    run = esc(run_id or "RUN")
    html = (f"{REATTACH_CSS}<div class='{REATTACH_CLASS}' role='status' style='padding:4px 8px;"
            "border-left:4px solid var(--jp-warn-color1,#ff9800)'>The live view of run "
            f"<b>{run}</b> needs the kernel that showed it; to see the run again, run "
            f"<code>%besser attach {run}</code> in a cell.</div>")
    return {"text/plain": reattach_line(run_id), "text/html": html}


def show(view: Any) -> None:
    """Display ``view``: static when it has ended, else the widget and its reattach line under display ids."""
    from IPython.display import display

    if view.state.finished:
        display(view.static_bundle(), raw=True)
        return
    display_id, line_id = uuid.uuid4().hex, uuid.uuid4().hex
    view.display_ids = [*getattr(view, "display_ids", []), display_id]
    view.line_ids = [*getattr(view, "line_ids", []), line_id]
    display(view._repr_mimebundle_(), raw=True, display_id=display_id)
    display(reattach_bundle(view.state.run_id), raw=True, display_id=line_id)
    _shown.add(view)
    _hook()


def refresh(view: Any) -> bool:
    """Replace every output ``view`` was displayed in with its static final state (once it has ended)."""
    if view not in _shown or not view.state.finished:
        return False
    from IPython.display import update_display

    try:
        bundle = view.static_bundle()
        for display_id in getattr(view, "display_ids", []):
            update_display(bundle, raw=True, display_id=display_id)
        for line_id in getattr(view, "line_ids", []):
            update_display({}, raw=True, display_id=line_id)
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
