"""Inside the sandbox: start-up and shut-down of an ASGI app in-process (the lifespan protocol), plus error capture.

The in-process transport never sends lifespan events, so the child drives them itself, the
way a server would: an app whose start-up handler raises is an app that does not start.
``ErrorRecorder`` wraps the app so an unhandled exception in a request is reported with its
type, message and the app's own frame, not only as a bare 500.
"""

from __future__ import annotations

import asyncio
import os
import traceback
from collections.abc import Awaitable, Callable, MutableMapping
from types import TracebackType

STARTUP_TIMEOUT_S = 30.0

# The ASGI interface, as the spec draws it: messages are mappings whose values vary by type.
Message = MutableMapping[str, object]
Scope = MutableMapping[str, object]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Lifespan:
    """``async with Lifespan(app) as ls``: ``ls.error`` is the start-up failure, if any."""

    def __init__(self, app: ASGIApp, timeout: float = STARTUP_TIMEOUT_S):
        self.app = app
        self.timeout = timeout
        self.error: str | None = None
        self.supported = True
        self.note = ""
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._started = asyncio.Event()
        self._stopped = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _receive(self) -> Message:
        return await self._inbox.get()

    async def _send(self, message: Message) -> None:
        kind = str(message.get("type", ""))
        if kind == "lifespan.startup.failed":
            self.error = str(message.get("message") or "start-up failed")
        if kind.startswith("lifespan.startup"):
            self._started.set()
        elif kind.startswith("lifespan.shutdown"):
            self._stopped.set()

    async def _run(self) -> None:
        scope: Scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        try:
            await self.app(scope, self._receive, self._send)
        except BaseException as exc:  # noqa: BLE001 - the app's failure is data here
            if not self._started.is_set():
                # Raising before answering means "no lifespan support" (what servers assume too);
                # Starlette and FastAPI report a failing start-up with ``lifespan.startup.failed``.
                self.supported = False
                self.note = describe_exception(exc)
        finally:
            self._started.set()
            self._stopped.set()

    async def __aenter__(self) -> Lifespan:
        self._task = asyncio.get_running_loop().create_task(self._run())
        await self._inbox.put({"type": "lifespan.startup"})
        try:
            await asyncio.wait_for(self._started.wait(), self.timeout)
        except TimeoutError:
            self.error = f"start-up did not finish within {self.timeout:.0f} s"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is None or self._task.done():
            return
        await self._inbox.put({"type": "lifespan.shutdown"})
        try:
            await asyncio.wait_for(self._stopped.wait(), 5.0)
        except TimeoutError:
            self._task.cancel()


class ErrorRecorder:
    """An ASGI wrapper that records (and re-raises) each unhandled exception of the app."""

    def __init__(self, app: ASGIApp, app_dir: str = ""):
        self.app = app
        self.app_dir = app_dir
        self.errors: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except BaseException as exc:
            if scope.get("type") == "http":
                self.errors.append(describe_exception(exc, self.app_dir))
            raise

    def take(self) -> str | None:
        if not self.errors:
            return None
        found, self.errors = self.errors[-1], []
        return found


def describe_exception(exc: BaseException, app_dir: str = "") -> str:
    """``Type: message (file:line in the app)``, one line, paths relative to the app copy."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    head = text[-1] if text else type(exc).__name__
    where = app_frame(exc.__traceback__, app_dir)
    return f"{head} ({where})" if where else head


def app_frame(tb: TracebackType | None, app_dir: str) -> str:
    """The innermost traceback frame inside ``app_dir`` as ``path:line``."""
    found = ""
    for frame in traceback.extract_tb(tb):
        name = frame.filename
        if app_dir and name.startswith(app_dir.rstrip("/") + "/"):
            found = f"{os.path.relpath(name, app_dir)}:{frame.lineno}"
    return found


def format_traceback(exc: BaseException, app_dir: str, limit_chars: int = 4000) -> str:
    """The traceback text with the app copy's absolute folder shortened (for start-up failures)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if app_dir:
        text = text.replace(app_dir.rstrip("/") + "/", "")
    return text if len(text) <= limit_chars else "..." + text[-limit_chars:]
