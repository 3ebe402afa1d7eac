"""Widget clicks reach a cell that awaits, also on kernels that queue them (ipykernel 6).

A cell that awaits a run (``await view.wait()``) needs a person's click on an approval card
to arrive while the cell is still running. ipykernel 7.4 and later dispatch widget messages
next to a running cell by themselves. ipykernel 6 puts every shell message, widget messages
included, in one queue that it serves one message at a time: the click would wait for the
cell, and the cell for the click.

``pass_widget_messages`` is called by ``RunView``'s waiting loop on every poll. On a kernel
with ipykernel 6's queue it takes the widget messages (``comm_open``, ``comm_msg``,
``comm_close``) out of the queue and hands them to the kernel's own handlers now; everything
else (the next cells' execute requests) goes back in its order. The waiting cell's parent
header is restored after each message, so its outputs stay in its own output area. On any
other kernel (7.4+, plain IPython, no kernel) it does nothing. ipykernel 7.0 to 7.3 neither
queue this way nor dispatch widget messages early; the package's requirements exclude them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
from typing import Any

log = logging.getLogger(__name__)

WIDGET_MESSAGES = frozenset({"comm_open", "comm_msg", "comm_close"})


def queueing_kernel() -> Any | None:
    """The running ipykernel when it queues widget messages behind a cell, on this loop; else None."""
    if "IPython" not in sys.modules:  # never import IPython just to find out there is no kernel
        return None
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None or getattr(kernel, "msg_queue", None) is None or getattr(kernel, "session", None) is None:
        return None
    io_loop = getattr(kernel, "io_loop", None)
    try:
        on_kernel_loop = asyncio.get_running_loop() is getattr(io_loop, "asyncio_loop", None)
    except RuntimeError:
        on_kernel_loop = False
    return kernel if on_kernel_loop else None


async def pass_widget_messages(kernel: Any | None = None) -> int:
    """Dispatch the widget messages waiting in the kernel's queue now; how many were handled."""
    kernel = kernel if kernel is not None else queueing_kernel()
    if kernel is None:
        return 0
    waiting = _take_widget_messages(kernel)
    for frames in waiting:
        await _dispatch(kernel, frames)
    return len(waiting)


def _take_widget_messages(kernel: Any) -> list[Any]:
    """Empty the queue synchronously, keep the widget messages, put the rest back in order."""
    if getattr(kernel, "shell_stream", None) is not None:
        kernel.shell_stream.flush()  # what has arrived on the socket joins the queue first
    # ipykernel 6 uses a tornado queue; qsize and the *_nowait pair work on any queue alike
    items = [kernel.msg_queue.get_nowait() for _ in range(kernel.msg_queue.qsize())]
    taken = []
    for item in items:
        frames = _shell_frames(kernel, item)
        if frames is not None and _message_type(kernel, frames) in WIDGET_MESSAGES:
            taken.append(frames)
        else:
            kernel.msg_queue.put_nowait(item)
    return taken


def _shell_frames(kernel: Any, item: Any) -> Any | None:
    """The raw frames of a queued shell message (ipykernel 6 queues ``(index, dispatch, args)``)."""
    if isinstance(item, tuple) and len(item) == 3:
        _, dispatch, args = item
        if dispatch == kernel.dispatch_shell and len(args) == 1:
            return args[0]
    return None


def _message_type(kernel: Any, frames: Any) -> str | None:
    """Peek at the header only (the session records a signature only when content is read)."""
    try:
        _, rest = kernel.session.feed_identities(frames, copy=False)
        return kernel.session.deserialize(rest, content=False, copy=False)["header"].get("msg_type")
    except Exception:  # noqa: BLE001 - an unreadable message stays queued for the kernel to report
        return None


async def _dispatch(kernel: Any, frames: Any) -> None:
    """Hand one widget message to the kernel's handler, then give the waiting cell its parent back."""
    parent, ident = kernel.get_parent("shell"), kernel._parent_ident.get("shell", b"")
    try:
        idents, rest = kernel.session.feed_identities(frames, copy=False)
        message = kernel.session.deserialize(rest, content=True, copy=False)
        kernel.set_parent(idents, message, channel="shell")
        handler = kernel.shell_handlers.get(message["header"]["msg_type"])
        if handler is not None:
            result = handler(kernel.shell_stream, idents, message)
            if inspect.isawaitable(result):
                await result
    except Exception:  # as the kernel does: a failing handler is logged, the waiting cell goes on
        log.exception("a widget message could not be handled while a cell waited")
    finally:
        kernel.set_parent(ident, parent, channel="shell")
