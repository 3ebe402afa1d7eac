"""Recorded replies of servers this project did not write (tests/data/wire/<server>-<version>/),
served again by the loopback server byte for byte, with their status and headers.

tests/wire_capture.py records them from the real server; each ``.json`` beside a body names the
server and version that produced it. Framing headers are the loopback server's own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from provider_server import Plan

WIRE = Path(__file__).resolve().parent / "data" / "wire"
_FRAMING = frozenset({"content-length", "transfer-encoding", "connection", "date"})


def recorded(server: str, name: str) -> tuple[dict[str, Any], bytes]:
    """(the metadata, the body) of one recording."""
    folder = WIRE / server
    return json.loads((folder / f"{name}.json").read_text()), (folder / f"{name}.sse").read_bytes()


def replayed(server: str, name: str) -> Plan:
    """The recording as a plan: one HTTP chunk per SSE event, as the proxy flushed them."""
    meta, body = recorded(server, name)
    headers = {k: v for k, v in meta["headers"].items() if k.lower() not in _FRAMING}
    pieces = [piece + b"\n\n" for piece in body.split(b"\n\n") if piece] if meta["status"] == 200 else [body]
    return Plan(meta["status"], pieces, headers)


def events_of(body: bytes) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of each SSE event in a recorded body; ``[DONE]`` stays text."""
    out: list[tuple[str | None, Any]] = []
    for block in body.decode().split("\n\n"):
        name, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            text = "\n".join(data)
            out.append((name, text if text == "[DONE]" else json.loads(text)))
    return out
