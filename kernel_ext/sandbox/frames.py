"""Length-prefixed JSON frames over a pipe: the one wire between the server and its warm workers.

Both sides of both workers use it: the server's ``WarmWorker`` (``workers``) and the programs
inside the sandbox (the app host and its children, the import checker). A frame is a 4-byte
big-endian length and that many bytes of UTF-8 JSON. Standard library only (``safejson`` is
too): the sandboxed programs import this before anything else.
"""

from __future__ import annotations

import json
import os
import struct
from typing import TypeAlias

from kernel_ext import safejson  # standard library only, like this module

MAX_FRAME = 32 * 1024 * 1024
# A frame's nesting: a response body (parsed at most safejson.DEFAULT_MAX_DEPTH deep) inside its envelope.
MAX_FRAME_DEPTH = 2 * safejson.DEFAULT_MAX_DEPTH
_HEADER = struct.Struct(">I")

# What a frame decodes to. The other side may be confined code, so a reader checks the shape it needs.
JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"


class FrameError(Exception):
    """The other side sent something that is not a frame (or a frame too large)."""


def encode(obj: object) -> bytes:
    try:
        data = json.dumps(obj, ensure_ascii=False, default=str, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (model text): escaped, so the frame stays UTF-8
        data = json.dumps(obj, ensure_ascii=True, default=str, separators=(",", ":")).encode("ascii")
    if len(data) > MAX_FRAME:
        raise FrameError(f"frame of {len(data)} bytes exceeds {MAX_FRAME}")
    return _HEADER.pack(len(data)) + data


def write_frame(fd: int, obj: object) -> None:
    """Write one whole frame to ``fd`` (blocking)."""
    view = memoryview(encode(obj))
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            if chunks:
                raise FrameError("the pipe closed in the middle of a frame")
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> JSONValue:
    """The next frame's object from ``fd`` (blocking); None at a clean end of stream."""
    head = _read_exactly(fd, _HEADER.size)
    if head is None:
        return None
    (length,) = _HEADER.unpack(head)
    if length > MAX_FRAME:
        raise FrameError(f"announced frame of {length} bytes exceeds {MAX_FRAME}")
    body = _read_exactly(fd, length)
    if body is None:
        raise FrameError("the pipe closed after a frame header")
    return decode_body(body)


def decode_body(body: bytes) -> JSONValue:
    try:
        value: JSONValue = safejson.loads(body.decode("utf-8"), MAX_FRAME_DEPTH)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(f"frame is not UTF-8 JSON: {exc}") from None
    return value


def as_object(value: JSONValue) -> dict[str, JSONValue]:
    """``value`` when it is a JSON object, else ``FrameError``: every message on this wire is one."""
    if not isinstance(value, dict):
        raise FrameError(f"a frame holds a JSON object, not {type(value).__name__}")
    return value


def number(value: JSONValue) -> float:
    """A numeric field of a frame (a number, or its text); ``FrameError`` otherwise."""
    if isinstance(value, (int, float, str)):
        try:
            return float(value)
        except ValueError:
            pass
    raise FrameError(f"a frame field holds a number, not {type(value).__name__}")


def text(value: JSONValue) -> str:
    """A text field of a frame; ``FrameError`` otherwise."""
    if not isinstance(value, str):
        raise FrameError(f"a frame field holds text, not {type(value).__name__}")
    return value


def split_frames(buffer: bytes) -> tuple[list[JSONValue], bytes]:
    """Whole frames at the start of ``buffer`` and the unconsumed rest."""
    out: list[JSONValue] = []
    while len(buffer) >= _HEADER.size:
        (length,) = _HEADER.unpack_from(buffer)
        if length > MAX_FRAME:
            raise FrameError(f"announced frame of {length} bytes exceeds {MAX_FRAME}")
        end = _HEADER.size + length
        if len(buffer) < end:
            break
        out.append(decode_body(buffer[_HEADER.size:end]))
        buffer = buffer[end:]
    return out, buffer
