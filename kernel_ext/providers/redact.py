"""Keeping keys out of everything a provider says: messages, logs, cassettes, shown endpoints.

Upstream error bodies are untrusted text: some endpoints echo the key, whole or in part, so
besides the shared rules of ``kernel_ext.secrets`` (known values, bearer credentials, key
shapes) any fragment of a known key eight characters or longer is cut here.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

from kernel_ext.secrets import REDACTED as MASK
from kernel_ext.secrets import redact_text

__all__ = ["MASK", "redact", "safe_url"]

_FRAGMENT = 8


def redact(text: str, secrets: Iterable[str | None] = (), *, shapes: bool = True) -> str:
    """``text`` without any fragment of ``secrets`` and (with ``shapes``) nothing shaped like a key.

    Cassettes pass ``shapes=False``: they must stay byte-faithful to what a run sends, so
    only the known keys are cut there.
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = _cut_fragments(text, secret)
    return redact_text(text) if shapes else text


def _cut_fragments(text: str, secret: str) -> str:
    text = text.replace(secret, MASK)
    if len(secret) < _FRAGMENT:
        return text
    spans: list[tuple[int, int]] = []
    for start in range(len(secret) - _FRAGMENT + 1):
        probe = secret[start : start + _FRAGMENT]
        at = text.find(probe)
        while at != -1:
            end = at + _FRAGMENT
            # extend the match as far as it keeps following the secret
            offset = start + _FRAGMENT
            while end < len(text) and offset < len(secret) and text[end] == secret[offset]:
                end += 1
                offset += 1
            spans.append((at, end))
            at = text.find(probe, at + 1)
    if not spans:
        return text
    spans.sort()
    merged: list[list[int]] = [list(spans[0])]
    for lo, hi in spans[1:]:
        if lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    pieces, last = [], 0
    for lo, hi in merged:
        pieces += [text[last:lo], MASK]
        last = hi
    pieces.append(text[last:])
    return "".join(pieces)


def safe_url(url: str) -> str:
    """A URL fit to show: no user-info, no query string, no fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
