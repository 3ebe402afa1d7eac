"""Keeping keys out of everything a provider says: messages, logs, cassettes, shown endpoints.

Upstream error bodies are untrusted text: some endpoints echo the key, whole or in part, so
besides the shared rules of ``kernel_ext.secrets`` (known values, bearer credentials, key
shapes) any fragment of a known key eight characters or longer (ten of its hex or base64 forms;
eight of it reversed; percent-encoded, escaped, as entities or with invisible characters between
its own, as ``kernel_ext.unmask`` reads it) is cut here, by the same matcher with a shorter fragment.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

from kernel_ext.secrets import REDACTED as MASK
from kernel_ext.secrets import matcher, redact_text

__all__ = ["MASK", "redact", "safe_url"]

_FRAGMENT = 8  # tighter than events' 12: an error body has no reason to hold any run of the key


def redact(text: str, secrets: Iterable[str | None] = (), *, shapes: bool = True) -> str:
    """``text`` without any fragment of ``secrets`` and (with ``shapes``) nothing shaped like a key.

    Cassettes pass ``shapes=False``: they must stay byte-faithful to what a run sends, so
    only the known keys are cut there.
    """
    text = matcher([s for s in secrets if s], fragment=_FRAGMENT, shortest=4).cut(text)
    return redact_text(text) if shapes else text


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
