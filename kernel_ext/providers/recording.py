"""Writing cassettes: every complete exchange of a run, as JSON lines, so it can be replayed offline.

Line 1 is a header naming what was recorded (label, model, endpoint; never a key). Each
following line is one exchange: the request in provider-neutral form and the events (or
the error) that answered it. Requests are stored as a delta: ``keep`` messages shared with
the previous request plus the ``append``-ed ones, and the system prompt only when it
changed, so a long run does not grow quadratically. Tool schemas are stored as digests.
Headers are never recorded at all, and every line is scrubbed of the provider's keys
before it is written.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernel_ext.providers.events import Event, ProviderError, TextDelta, event_to_dict
from kernel_ext.providers.messages import Request, message_to_dict
from kernel_ext.providers.redact import redact

__all__ = ["CASSETTE_VERSION", "CassetteWriter", "request_record", "tool_digest"]

log = logging.getLogger(__name__)

CASSETTE_VERSION = 1


def tool_digest(tool: dict[str, Any]) -> dict[str, str]:
    canonical = json.dumps(tool, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {"name": tool["name"], "sha256": hashlib.sha256(canonical.encode()).hexdigest()[:16]}


def request_record(request: Request) -> dict[str, Any]:
    """The comparable form of a request: system, messages, tool digests."""
    return {
        "system": request.system,
        "messages": [message_to_dict(m) for m in request.messages],
        "tools": [tool_digest(t) for t in request.tools],
    }


class CassetteWriter:
    """Appends exchanges to a new cassette at ``path`` (an existing file is replaced).

    ``best_effort`` (a run keeping its own turns): a line that cannot be written ends the
    recording and removes the file, so a cassette is whole or absent, and the run goes on."""

    def __init__(self, path: str | Path, recorded_from: dict[str, Any], *, secrets: tuple[str, ...] = (),
                 best_effort: bool = False):
        self.path = Path(path)
        self._secrets = tuple(s for s in secrets if s)
        self._previous: dict[str, Any] | None = None
        self.exchanges = 0
        self.best_effort = best_effort
        self.failed = ""  # why a best-effort recording stopped
        header = {
            "cassette": CASSETTE_VERSION,
            "recorded_from": recorded_from,
            "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(self._line(header), encoding="utf-8")

    def write(self, request: Request, events: list[Event], error: ProviderError | None) -> None:
        if self.failed:
            return
        try:
            self._write(request, events, error)
        except (OSError, ValueError) as exc:  # a full disk, a removed folder: never the run's end
            if not self.best_effort:
                raise
            self.failed = f"{type(exc).__name__}: {exc}"
            log.warning("cassette %s: recording stopped (%s); the file is removed", self.path.name, self.failed)
            self.path.unlink(missing_ok=True)

    def _write(self, request: Request, events: list[Event], error: ProviderError | None) -> None:
        current = request_record(request)
        previous = self._previous
        keep = 0
        if previous is not None:
            for old, new in zip(previous["messages"], current["messages"], strict=False):
                if old != new:
                    break
                keep += 1
        entry: dict[str, Any] = {"exchange": self.exchanges + 1}
        if previous is None or previous["system"] != current["system"]:
            entry["system"] = current["system"]
        entry["keep"] = keep
        entry["append"] = current["messages"][keep:]
        entry["tools"] = current["tools"]
        entry["events"] = [event_to_dict(e) for e in _merge_text(events)]
        if error is not None:
            entry["error"] = {"code": error.code, "message": error.message}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(self._line(entry))
        self._previous = current
        self.exchanges += 1

    def _line(self, record: dict[str, Any]) -> str:
        text = json.dumps(record, ensure_ascii=False)
        if not text.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            text = json.dumps(record)  # a lone surrogate (an endpoint's bytes) kept as its JSON escape: UTF-8 cannot hold it
        return redact(text, self._secrets, shapes=False) + "\n"


def _merge_text(events: list[Event]) -> list[Event]:
    """Consecutive text deltas as one (replay needs the text, not the original chunking)."""
    out: list[Event] = []
    for event in events:
        if isinstance(event, TextDelta) and out and isinstance(out[-1], TextDelta):
            out[-1] = TextDelta(out[-1].text + event.text)
        else:
            out.append(event)
    return out
