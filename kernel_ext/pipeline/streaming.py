"""A model's text shown while it arrives: ``text`` events marked ``partial``, then the final one.

Providers stream; the loop used to show a reply's text only once it was complete. A
``TextStream`` collects the pieces of one reply and, at most every ``interval`` seconds, emits
a ``text`` event with ``partial: true`` and the reply's ``stream`` id carrying the text *so far*,
redacted whole and then less its last ``HOLD`` characters as the matcher reads them
(``unmask.Reading.held_from``: a key still arriving as escapes, entities or with invisible
characters between its own is held as long as a plain one): a known secret split across pieces
is cut as one, and the start of one still arriving is never shown. Past ``limit`` characters it stops; the loop's final ``text``
event (same ``stream`` id, not partial) replaces what was shown. Readers that do not know the
fields see a few more text lines; the CLI and the view fold them.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from kernel_ext.hosting.bus import EventLog
from kernel_ext.secrets import FRAGMENT_CHARS, encoded_fragment, redact_text
from kernel_ext.unmask import Reading

STREAM_INTERVAL_S = 0.5  # at most two partial events a second per reply
STREAM_CHARS = 4_000  # a reply's text shown live up to here; the final event carries the rest
HOLD = encoded_fragment(FRAGMENT_CHARS)  # held back from a partial event: past what the matcher needs to cut a secret


class TextStream:
    """One reply's text as it arrives; ``add`` is the provider's ``on_text`` callback."""

    def __init__(self, events: EventLog, stream: str, *, interval: float = STREAM_INTERVAL_S,
                 limit: int = STREAM_CHARS, clock: Callable[[], float] = time.monotonic):
        self.events, self.id = events, stream
        self.interval, self.limit, self.clock = interval, limit, clock
        self._text = io.StringIO()
        self._size = 0
        self._last = clock()
        self.emitted = 0  # partial events emitted for this reply

    def add(self, piece: str) -> None:
        if self._size >= self.limit or not piece:
            return
        piece = piece[: self.limit - self._size]
        self._text.write(piece)
        self._size += len(piece)
        now = self.clock()
        if now - self._last >= self.interval or self._size >= self.limit:
            self._last = now
            text = redact_text(self._text.getvalue(), self.events.known_secrets)
            text = text[: Reading(text).held_from(HOLD)] if self._size < self.limit else text
            if text.strip():
                self.events.emit("text", text=text, partial=True, stream=self.id)
                self.emitted += 1

    @property
    def final_id(self) -> str:
        """The id the final event carries: the stream's when a partial was shown, else none."""
        return self.id if self.emitted else ""
