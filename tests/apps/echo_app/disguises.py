"""Ways to write a credential so that no run of its characters shows (stdlib only).

Shared by the echo app, which echoes the token it issued in each of them, and the tests that
ask every sink to hide them (``tests/secret_disguises.py`` reads them back on its own).
"""

from __future__ import annotations

import unicodedata

NAMED = {"/": "&sol;", "+": "&plus;", "=": "&equals;", "-": "&#45;", "_": "&lowbar;", ".": "&period;", ":": "&colon;"}
INVISIBLE = {"zwsp": "\u200b", "zwnj": "\u200c", "zwj": "\u200d", "cgj": "\u034f", "word-joiner": "\u2060",
             "bom": "\ufeff", "soft-hyphen": "\xad", "mongolian-vs": "\u180e", "variation-selector": "\ufe0f",
             "tag": "\U000e0041", "hangul-filler": "\u3164", "nbsp": "\xa0"}


def _percent(text: str) -> str:
    return "".join(f"%{b:02X}" for b in text.encode())


def _math(char: str, letters: str, digits: str) -> str:
    """``char`` as a mathematical letter or digit (italic small h is the Planck constant)."""
    if char == "h" and letters == "ITALIC":
        return "\u210e"
    kind = "DIGIT" if char.isdigit() else "SMALL" if char.islower() else "CAPITAL"
    name = {"0": "ZERO", "1": "ONE", "2": "TWO", "3": "THREE", "4": "FOUR", "5": "FIVE", "6": "SIX", "7": "SEVEN",
            "8": "EIGHT", "9": "NINE"}.get(char, char.upper())
    style = digits if char.isdigit() else letters
    return unicodedata.lookup(f"MATHEMATICAL {style} {kind} {name}") if char.isascii() and char.isalnum() else char


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
    "percent-double": lambda t: _percent(t).replace("%", "%25"),
    "percent-of-u-escapes": lambda t: "".join(f"%5Cu{ord(c):04x}" for c in t),
    "u-escapes-of-percent": lambda t: "".join(f"\\u{ord(c):04x}" for c in _percent(t)),
    "html-of-percent": lambda t: "".join(f"&#{ord(c)};" for c in _percent(t)),
    "hex-0x-spaces": lambda t: " ".join(f"0x{b:02x}" for b in t.encode()),
    "hex-0x-commas": lambda t: ", ".join(f"0x{b:02X}" for b in t.encode()),
    "octal-escapes": lambda t: "".join(f"\\{b:03o}" for b in t.encode()),
    "backslash-newline": lambda t: "\\\n".join(t),
    "combining-acute": lambda t: "".join(c + "\u0301" for c in t),
    "combining-acute-composed": lambda t: unicodedata.normalize("NFC", "".join(c + "\u0301" for c in t)),
    "tag-characters": lambda t: "".join(chr(0xE0000 + ord(c)) for c in t),
    "fullwidth": lambda t: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in t),
    "math-bold": lambda t: "".join(_math(c, "BOLD", "BOLD") for c in t),
    "math-italic": lambda t: "".join(_math(c, "ITALIC", "SANS-SERIF") for c in t),
    "mixed": lambda t: "".join((f"%{ord(c):02x}", f"&#{ord(c)};", f"\\u{ord(c):04x}", c + "\u200d")[i % 4] for i, c in enumerate(t)),
}


def disguise(text: str, form: str) -> str:
    return FORMS[form](text)
