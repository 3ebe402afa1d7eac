"""A cell that awaits a run and is interrupted: one line, no traceback; the run goes on.

Interrupting a cell that awaits a run (``await view.wait()``, ``answer_cards``) cancels the
cell's task, not the run: the run is hosted by the server extension or by the kernel's loop,
and carries on (its cards can still be answered). ``StoppedWaiting`` says so in one line;
IPython prints an exception's ``_render_traceback_`` instead of a traceback.
"""

from __future__ import annotations


class StoppedWaiting(Exception):
    """The cell stopped waiting for run ``run_id``; the run itself goes on."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        super().__init__(f"stopped waiting; the run goes on: %besser attach {run_id or 'RUN'}")

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def in_a_cell() -> bool:
    """True inside an IPython shell (a kernel's cell); elsewhere a cancelled wait stays a cancellation."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None
