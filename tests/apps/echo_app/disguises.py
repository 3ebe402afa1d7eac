"""Ways to write a credential so that no run of its characters shows (stdlib only).

Shared by the echo app, which echoes the token it issued in each of them, and the tests that
ask every sink to hide them (``tests/secret_disguises.py`` reads them back on its own).
"""

from __future__ import annotations

NAMED = {"/": "&sol;", "+": "&plus;", "=": "&equals;", "-": "&#45;", "_": "&lowbar;", ".": "&period;", ":": "&colon;"}
INVISIBLE = {"zwsp": "\u200b", "zwnj": "\u200c", "zwj": "\u200d", "cgj": "\u034f", "word-joiner": "\u2060",
             "bom": "\ufeff", "soft-hyphen": "\xad", "mongolian-vs": "\u180e", "variation-selector": "\ufe0f",
             "tag": "\U000e0041", "hangul-filler": "\u3164", "nbsp": "\xa0"}


def _every(text: str, join: str, size: int = 6) -> str:
    return join.join(text[i : i + size] for i in range(0, len(text), size))


FORMS = {
    "percent-every-byte": lambda t: "".join(f"%{b:02X}" for b in t.encode()),
    "percent-every-byte-lower": lambda t: "".join(f"%{b:02x}" for b in t.encode()),
    "u-escapes": lambda t: "".join(f"\\u{ord(c):04x}" for c in t),
    "u-escapes-doubled": lambda t: "".join(f"\\\\u{ord(c):04X}" for c in t),
    "x-escapes": lambda t: "".join(f"\\x{b:02x}" for b in t.encode()),
    "big-u-escapes": lambda t: "".join(f"\\U{ord(c):08x}" for c in t),
    "html-decimal": lambda t: "".join(f"&#{ord(c)};" for c in t),
    "html-hex": lambda t: "".join(f"&#x{ord(c):x};" for c in t),
    "html-named": lambda t: "".join(NAMED.get(c, c) for c in t),
    "hex-colons": lambda t: ":".join(f"{b:02x}" for b in t.encode()),
    "hex-spaces": lambda t: " ".join(f"{b:02X}" for b in t.encode()),
    **{f"{name}-every-6": (lambda t, c=char: _every(t, c)) for name, char in INVISIBLE.items()},
    "zwsp-every-character": lambda t: "\u200b".join(t),
    "mixed": lambda t: "".join((f"%{ord(c):02x}", f"&#{ord(c)};", f"\\u{ord(c):04x}", c + "\u200d")[i % 4] for i, c in enumerate(t)),
}


def disguise(text: str, form: str) -> str:
    return FORMS[form](text)
