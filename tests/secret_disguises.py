"""A credential in every disguise the sinks must see through, and an independent reader of them.

``FORMS`` come from the echo app's own module (``tests/apps/echo_app/disguises.py``), so the app
that issues a token and the tests that look for it use one table. ``reveal`` reads a text back
on its own (``urllib``, ``html``, ``unicodedata``; not ``kernel_ext.unmask``), so a disguise the
matcher forgot fails here.
"""

from __future__ import annotations

import html
import importlib.util
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

_spec = importlib.util.spec_from_file_location("echo_app_disguises", Path(__file__).parent / "apps" / "echo_app" / "disguises.py")
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
FORMS: dict = _module.FORMS
INVISIBLE: dict[str, str] = _module.INVISIBLE
disguise = _module.disguise

# Default-ignorable code points that are not Cf and not variation selectors (DerivedCoreProperties).
OTHER_IGNORABLE = {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2065, 0x3164, 0xFFA0, *range(0xFFF0, 0xFFF9), *range(0xE0000, 0xE1000)}


def invisible(char: str) -> bool:
    """Shows as nothing: a format character, or another default-ignorable code point."""
    code = ord(char)
    return (unicodedata.category(char) == "Cf" or code in OTHER_IGNORABLE
            or "VARIATION SELECTOR" in unicodedata.name(char, "") or 0x180B <= code <= 0x180F)


def _dropped(char: str) -> bool:
    return invisible(char) or unicodedata.category(char) in ("Zs", "Zl", "Zp", "Cc")


def reveal(text: str) -> str:
    """What ``text`` spells: escapes, percent-encoding, entities and ``0x`` bytes decoded (three
    times over, for nested ones), backslash-newlines joined, tag-character runs read as ASCII,
    compatibility letters folded (NFKD), invisible characters, marks, spaces and separators dropped."""
    for _ in range(3):
        text = re.sub(r"\\+U([0-9a-fA-F]{8})", lambda m: chr(int(m[1], 16)), text)
        text = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text)
        text = re.sub(r"\\+x([0-9a-fA-F]{2})", lambda m: chr(int(m[1], 16)), text)
        text = re.sub(r"\\+([0-3][0-7]{2})", lambda m: chr(int(m[1], 8)), text)
        text = re.sub(r"\b0[xX]([0-9a-fA-F]{2})\b", lambda m: chr(int(m[1], 16)), text.replace("\\\n", ""))
        text = re.sub("[\U000e0000-\U000e007f]{4,}", lambda m: "".join(chr(ord(c) - 0xE0000) for c in m[0]), text)
        text = unicodedata.normalize("NFKD", html.unescape(unquote(text)))
    text = "".join(c for c in text if not _dropped(c) and unicodedata.category(c) not in ("Mn", "Me"))
    return re.sub(r"[+\-_.,\"':]", "", text)


def assert_hidden(text: str | bytes, key: str, where: str) -> None:
    """No 12 characters of ``key`` and no 16 digits of its hex in what ``text`` spells."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    shown = reveal(text)
    plain = re.sub(r"[+\-_.,\"':]", "", key)
    for i in range(len(plain) - 11):
        assert plain[i : i + 12] not in shown, f"{where} spells {plain[i : i + 12]!r}"
    digits, lowered = key.encode().hex(), shown.lower()
    for i in range(0, len(digits) - 15, 2):
        assert digits[i : i + 16] not in lowered, f"{where} spells hex {digits[i : i + 16]!r}"
