"""What looks like a secret, and how to remove it before it can travel.

One definition serves every layer: the sandbox strips secret-named variables from tool
environments, events and reports redact secret-named fields and known secret values, and
request reports hide credentials. Redaction happens before an event is built, so nothing
downstream (widgets, notebooks, logs, ``events.jsonl``) ever holds the value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kernel_ext.safetext import DEEP, WALK_DEPTH

REDACTED = "[redacted]"

# Parts of a name that mark its value as a secret (matched on word pieces, case-insensitive).
SECRET_NAME_PARTS = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
    "AUTHORIZATION",
    "COOKIE",
    "PRIVATE",
    "SIGNATURE",
    "APIKEY",
)
_NAME_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z])(?=[A-Z])")
_BEARER = re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}")
_KEY_SHAPES = re.compile(
    r"\b(sk-[A-Za-z0-9_-]{16,}|sk-ant-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)


def is_secret_name(name: str) -> bool:
    """True for names like ``OPENAI_API_KEY``, ``accessToken``, ``db-password``, ``Authorization``."""
    pieces = [p.upper() for p in _NAME_SPLIT.split(name) if p]
    joined = "".join(pieces)
    return any(piece in SECRET_NAME_PARTS for piece in pieces) or any(
        part in joined for part in ("APIKEY", "SECRET", "PASSWORD", "ACCESSTOKEN", "AUTHTOKEN", "CREDENTIAL")
    )


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """Replace known secret values, bearer credentials and key-shaped strings in ``text``."""
    for secret in sorted({s for s in known if s and len(s) >= 6}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return _KEY_SHAPES.sub(REDACTED, text)


def redact(value: Any, known: Iterable[str] = ()) -> Any:
    """A deep copy of ``value`` with secret-named string fields and secret-looking strings redacted.

    Keys are text too: a credential used as a JSON key, a header name or a tool-argument name
    (the model chooses those) is rewritten like any other string. Two keys that redact alike
    stay apart (``[redacted]``, ``[redacted]#2``), so no value is lost by the rewrite.
    """
    return _redact(value, tuple(known), 0)


def _redact(value: Any, known: tuple[str, ...], depth: int) -> Any:
    """``redact`` to ``safetext.WALK_DEPTH`` levels; a deeper subtree becomes ``safetext.DEEP`` (no
    nesting a model sends can exhaust the recursion limit while an event is built)."""
    if isinstance(value, (dict, list, tuple)) and depth >= WALK_DEPTH:
        return DEEP
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            secret_field = isinstance(key, str) and isinstance(item, str) and item and is_secret_name(key)
            out[_free_key(redact_key(key, known), out)] = REDACTED if secret_field else _redact(item, known, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_redact(item, known, depth + 1) for item in value]
    if isinstance(value, str):
        return redact_text(value, known)
    return value


def redact_key(key: Any, known: Iterable[str] = ()) -> Any:
    """A mapping key (or header name) with known secrets and key shapes cut; other keys unchanged."""
    return redact_text(key, known) if isinstance(key, str) else key


def _free_key(key: Any, taken: Mapping[Any, Any]) -> Any:
    if key not in taken:
        return key
    number = 2
    while f"{key}#{number}" in taken:
        number += 1
    return f"{key}#{number}"


def secret_values(environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Values of secret-named variables (and ``extra``): redacted from every event of a run.

    Only values shaped like credentials count (12+ characters, no spaces, not a path), so a
    variable such as ``AUTH_MODE=enabled`` cannot blank a common word out of every event.
    """
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _credential_shaped(v) and is_secret_name(k)}
    values.update(v for v in extra if v)
    return tuple(sorted(values))


def _credential_shaped(value: str) -> bool:
    return len(value) >= 12 and not any(c.isspace() for c in value) and not value.startswith(("/", "~", "."))
