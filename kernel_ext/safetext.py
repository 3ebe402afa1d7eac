"""Text that can always be written: the one cleaning every event field passes through.

A model's stream (or a file name, or a tool's output) can hold text no log can take: a lone
surrogate (``"\\ud800"`` in a JSON chunk decodes to one), NULs and terminal escapes. Such a
string fails ``encode("utf-8")`` (ending a run unnamed) or rewrites the person's terminal. Each
lone surrogate becomes U+FFFD; each control character other than ``\\n`` and ``\\t`` is shown
as an escape (``\\x1b``), ``\\r\\n`` becoming ``\\n``. Non-finite floats inside a payload become
``null``, which JSON can hold. ``pipeline/events.py`` applies it to every event built.

``valid_unicode`` is the lighter rule for data the host keeps (a model's text, the values of
its tool calls as the planner reads them): lone surrogates only, control characters kept, so
any file or request body can hold it.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["safe_text", "safe_value", "valid_unicode"]

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace(match: re.Match[str]) -> str:
    char = match.group()
    return "\ufffd" if "\ud800" <= char <= "\udfff" else f"\\x{ord(char):02x}"


def safe_text(text: str) -> str:
    """``text`` as valid, printable-safe Unicode (unchanged when it already is)."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_replace, text.replace("\r\n", "\n"))


def safe_value(value: Any) -> Any:
    """``value`` with every string (dict keys too) made safe, recursively; a new container."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_value(k) if isinstance(k, str) else k: safe_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_value(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def valid_unicode(value: Any) -> Any:
    """``value`` with every lone surrogate (in strings, keys, nested) replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {valid_unicode(k): valid_unicode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_unicode(v) for v in value]
    return value
