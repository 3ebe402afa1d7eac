"""What an endpoint's error says, read from the head of its reply however long the body is.

A refusal is recognised by its type (``quota.py``: a spent budget is final, never retried), so the
type must be found whether the body is 1 KiB or 20 MiB and wherever the padding sits: after the
error object or inside it (a long ``message`` before ``type``). ``ErrorHead`` scans the body's
bytes as they arrive, keeps only bounded prefixes of the few fields that name an error, and says
it is ``done`` as soon as the leading object's ``error`` object (or the leading value) closes, so
the rest is never read. Nothing is held but those prefixes and the first ``HEAD_BYTES`` (the
message of a body that is not JSON). ``error_fields`` is the one reading of an error object,
for a status reply's head and for an error inside a stream alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["HEAD_BYTES", "ErrorHead", "error_fields"]

HEAD_BYTES = 4096  # a body that is not JSON: its message is this much of its start
KEEP_BYTES = 4096  # of each field kept (its escapes still in), enough for a message's figures
KEY_BYTES = 64  # a longer key names nothing wanted here
MAX_DEPTH = 64
FIELDS = ("type", "code", "message", "detail")
# the values kept, by their path from the leading object: its own fields, and its error's
WANTED = frozenset({(name,) for name in (*FIELDS, "error")} | {("error", name) for name in FIELDS})

_SPACE = re.compile(rb"[ \t\r\n]*")
_STRING_STOP = re.compile(rb'["\\]')
_SCALAR = re.compile(rb'[^ \t\r\n,:\[\]{}"]*')
_KIND = re.compile(r"[A-Za-z0-9_-]{1,48}")


def error_fields(parsed: Mapping[str, Any]) -> tuple[str, str]:
    """(type, message) of an error object: ``{"error": {"type"|"code", "message"|"detail"}}``,
    or those fields at the top; a type that is not a short word is no type."""
    error = parsed.get("error", parsed)
    if isinstance(error, Mapping):
        kind = _text(error.get("type")) or _text(error.get("code"))
        message = _text(error.get("message")) or _text(error.get("detail"))
    else:
        kind, message = "", _text(error)
    return (kind if _KIND.fullmatch(kind) else ""), message


def _text(value: Any) -> str:
    """A field's words: a string, or a number's text; a container or null says nothing."""
    if value is None or value is False or isinstance(value, (list, dict, Mapping)):
        return ""
    return value if isinstance(value, str) else str(value)


class _Frame:
    __slots__ = ("array", "key", "path")

    def __init__(self, array: bool, path: tuple[str, ...] | None):
        self.array = array
        self.path = path  # None: not followed (inside an array, or deeper than a wanted field)
        self.key: str | None = None


class ErrorHead:
    """An incremental scan of an error body: ``feed`` pieces until ``done``, then ``fields()``."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.done = False
        self.json = False  # the body starts with an object
        self._found: dict[tuple[str, ...], Any] = {}
        self._stack: list[_Frame] = []
        self._expect = "value"  # value | key | colon | comma (inside a container) | end
        self._string: bytearray | None = None  # the string being read, kept up to its bound
        self._string_kind = ""  # "" (not in a string) | "key" | "value"
        self._string_size = 0
        self._escape = False
        self._scalar: bytearray | None = None
        self._plain = False  # not JSON: only its head is read

    def feed(self, data: bytes) -> None:
        if self.done or not data:
            return
        if len(self.head) < HEAD_BYTES:
            self.head += data[: HEAD_BYTES - len(self.head)]
        if self._plain:
            self.done = len(self.head) >= HEAD_BYTES
            return
        at = 0
        while at < len(data) and not self.done:
            at = self._step(data, at)

    def fields(self) -> tuple[str, str]:
        """(type, message): from the leading object when the body is one, else its head as text."""
        if not self.json:
            return "", self.head.decode("utf-8", "replace").strip()
        found = dict(self._found)
        if self._string_kind == "value" and self._string is not None:  # cut off inside a wanted string
            path = self._path()
            if path is not None:
                found[path] = _unescape(bytes(self._string))
        error = found.get(("error",))
        parsed: dict[str, Any] = {k[0]: v for k, v in found.items() if len(k) == 1}
        if isinstance(error, dict):
            parsed["error"] = {k[1]: v for k, v in found.items() if len(k) == 2}
        return error_fields(parsed)

    # -- the scan ------------------------------------------------------------------------------

    def _step(self, data: bytes, at: int) -> int:
        if self._string_kind:
            return self._in_string(data, at)
        if self._scalar is not None:
            return self._in_scalar(data, at)
        at = _SPACE.match(data, at).end()  # type: ignore[union-attr]  # matches the empty string
        if at >= len(data):
            return at
        byte = data[at : at + 1]
        if not self._stack and self._expect == "value" and not self.json:
            if byte != b"{":
                self._plain = True  # not a JSON object: its head is the message
                self.done = len(self.head) >= HEAD_BYTES
                return len(data)
            self.json = True
        if self._expect == "value":
            return self._value(data, byte, at)
        if self._expect == "key":
            if byte == b'"':
                self._open_string("key")
            elif byte == b"}" and self._stack[-1].key is None:
                self._close()
            else:
                self.done = True
            return at + 1
        if self._expect == "colon":
            self._expect = "value" if byte == b":" else "end"
            self.done = byte != b":"
            return at + 1
        return self._after_value(byte, at)

    def _value(self, data: bytes, byte: bytes, at: int) -> int:
        if byte in (b"{", b"["):
            path = self._path()
            if len(self._stack) >= MAX_DEPTH:
                self.done = True
                return at
            if path == ("error",):
                self._found[path] = {} if byte == b"{" else []
            self._stack.append(_Frame(byte == b"[", path if byte == b"{" and path is not None and len(path) < 2 else None))
            self._expect = "value" if byte == b"[" else "key"
            return at + 1
        if byte == b"]" and self._stack and self._stack[-1].array:
            self._close()  # an empty array
            return at + 1
        if byte == b'"':
            self._open_string("value")
            return at + 1
        if byte in (b"}", b"]", b",", b":"):
            self.done = True
            return at
        self._scalar = bytearray()
        return self._in_scalar(data, at)

    def _after_value(self, byte: bytes, at: int) -> int:
        frame = self._stack[-1]
        if byte == b",":
            self._expect = "value" if frame.array else "key"
            frame.key = None
        elif byte == (b"]" if frame.array else b"}"):
            self._close()
        else:
            self.done = True
        return at + 1

    def _path(self) -> tuple[str, ...] | None:
        if not self._stack:
            return ()
        frame = self._stack[-1]
        if frame.array or frame.path is None or frame.key is None:
            return None
        return (*frame.path, frame.key)

    def _close(self) -> None:
        frame = self._stack.pop()
        if frame.path == ("error",) or not self._stack:
            self.done = True  # the error object is whole (or the leading value is): the rest is padding
        self._expect = "comma"

    def _value_done(self, value: Any) -> None:
        path = self._path()
        if path in WANTED:
            self._found[path] = value
        if not self._stack:
            self.done = True
        self._expect = "comma"

    def _open_string(self, kind: str) -> None:
        path = self._path() if kind == "value" else None
        keep = kind == "key" or path in WANTED
        self._string_kind, self._string, self._string_size, self._escape = kind, bytearray() if keep else None, 0, False

    def _in_string(self, data: bytes, at: int) -> int:
        start = at
        if self._escape:
            at, self._escape = at + 1, False
        while True:
            found = _STRING_STOP.search(data, at)
            if found is None:
                self._keep(data[start:])
                return len(data)
            at = found.start()
            if data[at : at + 1] == b"\\":
                if at + 1 >= len(data):
                    self._escape = True
                    self._keep(data[start:])
                    return len(data)
                at += 2
                continue
            self._keep(data[start:at])
            self._end_string()
            return at + 1

    def _keep(self, piece: bytes) -> None:
        self._string_size += len(piece)
        limit = KEY_BYTES + 1 if self._string_kind == "key" else KEEP_BYTES
        if self._string is not None and len(self._string) < limit:
            self._string += piece[: limit - len(self._string)]

    def _end_string(self) -> None:
        kind, raw, size = self._string_kind, self._string, self._string_size
        self._string_kind, self._string = "", None
        if kind == "key":
            self._stack[-1].key = _unescape(bytes(raw or b"")) if size <= KEY_BYTES else "\x00"  # too long: no wanted key
            self._expect = "colon"
            return
        self._value_done(_unescape(bytes(raw)) if raw is not None else None)

    def _in_scalar(self, data: bytes, at: int) -> int:
        end = _SCALAR.match(data, at).end()  # type: ignore[union-attr]
        assert self._scalar is not None
        if len(self._scalar) < KEY_BYTES:
            self._scalar += data[at:end][: KEY_BYTES - len(self._scalar)]
        if end >= len(data):
            return end  # the scalar may go on in the next piece
        token, self._scalar = bytes(self._scalar), None
        self._value_done(_scalar(token))
        return end


def _unescape(raw: bytes) -> str:
    """A JSON string's kept bytes as text; a prefix cut inside an escape or a character loses its tail."""
    text = raw.decode("utf-8", "ignore")
    for cut in range(7):
        try:
            value = json.loads('"' + text[: len(text) - cut] + '"')
        except ValueError:
            continue
        return value if isinstance(value, str) else ""
    return text


def _scalar(token: bytes) -> Any:
    text = token.decode("ascii", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text
