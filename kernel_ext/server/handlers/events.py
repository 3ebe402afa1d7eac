"""``GET runs/{id}/events``: the run's events as server-sent events, resumable, kept alive.

Each event is sent as ``id: <seq>`` / ``event: <type>`` / ``data: <json>``. A client that
reconnects with ``Last-Event-ID: N`` (or ``?after=N``) gets every event after N and then the
live ones. While nothing happens a comment line goes out every ``heartbeat_s`` seconds, so
proxies keep the connection open. The stream ends after the run's ``done`` event; a run
loaded from disk (nothing runs for it) ends after its replay.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from kernel_ext.hosting.events import BaseEvent
from kernel_ext.hosting.offloop import off_loop
from kernel_ext.hosting.run import Run
from kernel_ext.hosting.stored import StoredEvents
from kernel_ext.hosting.stored import frame as sse_frame
from kernel_ext.server.handlers.base import BesserHandler, Refusal

RETRY_MS = 2000
EVENT_STREAM = "text/event-stream; charset=utf-8"


REPLAY_BATCH_CHARS = 256 * 1024


def _frames(events: Sequence[BaseEvent], position: int) -> tuple[str, int]:
    """Frames from ``position`` on, about ``REPLAY_BATCH_CHARS`` of them, and where they stopped."""
    frames, size = [], 0
    while position < len(events) and size < REPLAY_BATCH_CHARS:
        text = sse_frame(events[position])
        frames.append(text)
        size += len(text)
        position += 1
    return "".join(frames), position


class EventsHandler(BesserHandler):
    auth_resource = "besser-agent:events"

    def initialize(self) -> None:
        self._closed = asyncio.Event()

    def on_connection_close(self) -> None:
        self._closed.set()

    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        run = await self.find_run(run_id)
        after = self._resume_point()
        limits = self.state.streams
        if limits.open >= limits.max_open:
            raise Refusal(429, "TOO_MANY_STREAMS", f"{limits.open} event streams are open on this server, its most; "
                          "close views you no longer watch, or try again in a moment")
        limits.open += 1
        try:
            await self._stream(run, after)
        finally:
            limits.open -= 1

    async def _stream(self, run: Run, after: int) -> None:
        self.set_header("Content-Type", EVENT_STREAM)
        self.set_header("Cache-Control", "no-cache, no-transform")
        self.set_header("X-Accel-Buffering", "no")  # nginx: do not buffer the stream
        live = run.task is not None and not run.task.done()
        try:
            await self._send(f"retry: {RETRY_MS}\n\n")
            if not live:
                await self._replay(run.events.since(after))
            else:
                await self._follow(run.events.follow(after))
        except StreamClosedError:
            return
        if not self._closed.is_set():
            self.finish(set_content_type=EVENT_STREAM)

    async def _replay(self, events: Sequence[BaseEvent]) -> None:
        """A finished run's events, serialised in a worker thread a batch at a time and flushed
        per batch: a log of tens of MB neither stalls the loop nor piles up in the write buffer."""
        async with self.state.streams.replays:
            await self._replay_batches(events)

    async def _replay_batches(self, events: Sequence[BaseEvent]) -> None:
        position = 0
        text: str | bytes
        while position < len(events):
            if isinstance(events, StoredEvents):  # a reloaded log holds its frames: a join, on the loop
                text, position = events.frames(position, REPLAY_BATCH_CHARS)
            else:
                text, position = await off_loop(_frames, events, position)
            await self._send(text)
        await self.flush()

    async def _follow(self, stream) -> None:
        """Forward ``stream`` until it ends or the client leaves; a heartbeat while it is quiet."""
        closed = asyncio.ensure_future(self._closed.wait())
        pending = None
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(anext(stream))
                done, _ = await asyncio.wait({pending, closed}, timeout=self.state.heartbeat_s, return_when=asyncio.FIRST_COMPLETED)
                if closed in done:
                    raise StreamClosedError()
                if pending not in done:
                    await self._send(": heartbeat\n\n")
                    continue
                try:
                    event = pending.result()
                except StopAsyncIteration:
                    return
                pending = None
                await self._send(sse_frame(event))
        finally:
            for task in (pending, closed):
                if task is not None and not task.done():
                    task.cancel()
            with contextlib.suppress(Exception):
                await stream.aclose()

    async def _send(self, text: str | bytes, *, flush: bool = True) -> None:
        if self._closed.is_set():
            raise StreamClosedError()
        self.write(text)
        if flush:
            await self.flush()

    def _resume_point(self) -> int:
        raw = self.request.headers.get("Last-Event-ID") or self.get_query_argument("after", "0")
        try:
            after = int(raw.strip() or 0)
        except ValueError:
            raise Refusal(400, "INVALID_REQUEST", f"Last-Event-ID must be an event number, got {raw!r}") from None
        return max(after, 0)
