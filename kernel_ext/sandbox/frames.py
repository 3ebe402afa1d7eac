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
from typing import Any

from kernel_ext import safejson  # standard library only, like this module

MAX_FRAME = 32 * 1024 * 1024
# A frame's nesting: a response body (parsed at most safejson.DEFAULT_MAX_DEPTH deep) inside its envelope.
MAX_FRAME_DEPTH = 2 * safejson.DEFAULT_MAX_DEPTH
_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """The other side sent something that is not a frame (or a frame too large)."""


def encode(obj: Any) -> bytes:
    try:
        data = json.dumps(obj, ensure_ascii=False, default=str, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (model text): escaped, so the frame stays UTF-8
        data = json.dumps(obj, ensure_ascii=True, default=str, separators=(",", ":")).encode("ascii")
    if len(data) > MAX_FRAME:
        raise FrameError(f"frame of {len(data)} bytes exceeds {MAX_FRAME}")
    return _HEADER.pack(len(data)) + data


def write_frame(fd: int, obj: Any) -> None:
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


def read_frame(fd: int) -> Any:
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


def decode_body(body: bytes) -> Any:
    try:
        return safejson.loads(body.decode("utf-8"), MAX_FRAME_DEPTH)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(f"frame is not UTF-8 JSON: {exc}") from None


def split_frames(buffer: bytes) -> tuple[list[Any], bytes]:
    """Whole frames at the start of ``buffer`` and the unconsumed rest."""
    out: list[Any] = []
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
