"""Redacting a run's secrets from 2 MB of text: whole, in 12-character pieces, spelled out.

``kernel_ext.secrets.redact_text`` runs on every event field. Since it cuts any run of 12+
characters of a known secret (issue G7 follow-up), it must stay linear and cheap: one RE2
pass over the text with whitespace dropped, work beyond that only where a piece was found.
Baseline: the whole-value ``str.replace`` it replaced (which missed every piece), same text.
Target: the median under 250 ms for 2 MB (the issue: "well under a second").

Since G7 item 6 (encoded forms): the automaton also holds every 16-character run of each
secret's reversed, hex, base64 (3 alignments x standard/URL-safe) and percent forms, and the
text is read past a few separators (``+ - _ . , " '``) as well as whitespace. Measured on the
same shared 2-core machine, median ms before -> after (two runs after): no secret 93 -> 58/83,
prefix-less echoes 131 -> 90/122, spaced echoes 90 -> 66/78; the new base64-echo text 95.
Within noise of before, well inside the 2x allowed: the literal alternation grows ~15x but
RE2's DFA cost per byte does not.

Since issue 28 items 6 and 9 (``kernel_ext.unmask``: the text is read with percent-encoding,
``\\u``/``\\x`` escapes and HTML entities decoded and invisible characters dropped), five texts
more: code full of escapes but no secret, and 500 echoes of the key percent-encoded byte by
byte, ``\\u``-escaped, as decimal entities and with U+200B every 6 characters (the old code
cut none of these). Old code (main at 1e1f6f2) and new measured alternately, twice each, on
the shared 2-core machine under heavy load from other sessions (the old "no secret" figure
alone moved 160 -> 218 -> 486 ms between runs), median ms old -> new: no secret 218/486 ->
405/482, prefix-less 442/706 -> 537/723, spaced-out 176/345 -> 337/544, base64 213/596 ->
568/760, percent echoes 220/522 -> 171/531, \\u echoes 371/474 -> 343/384, entity echoes
672/441 -> 555/564, U+200B echoes 490/378 -> 428/415: within that noise (a text with no
``%``, ``\\`` or ``&`` is not lexed; one with a few is lexed by ``re`` skipping to them in C,
~14 ms for 2 MB). One figure is worse, for a reason: "code full of escapes, no secret" (2 MB
holding ~200,000 escapes) 651/519 -> 1804/2770, as each escape is decoded in Python (a few
microseconds each, linear); the old code read none of them, which is how an escaped key got
through. Event fields are kilobytes, so this is ~1 ms per 100 escapes in practice.

Since issue 28's second red team (nested encodings, octal, ``0x`` bytes, backslash-newlines,
combining marks, tag characters, fullwidth/mathematical letters): four texts more (non-ASCII
prose with no secret; 500 double-percent, fullwidth and combining-mark echoes, all cut now,
none before). Main (a3b9cf9) then this branch, once each, same shared machine under load,
median ms old -> new: no secret 304 -> 461, prefix-less 362 -> 162, spaced-out 367 -> 536,
base64 170 -> 547, percent 386 -> 242, \\u 318 -> 490, entities 378 -> 671, U+200B 248 -> 609,
double-percent 247 -> 249, fullwidth 307 -> 228, combining 475 -> 368 (ASCII texts take the
same path as before: swings both ways are load). Worse, for a reason: "code full of escapes"
2013 -> 4683 (each round that decoded something runs again: ``\\u00e9`` becomes é, which is
then folded, and ``%%`` is lexed again; up to three linear rounds), and "accents, CJK and
emoji" 237 -> 1627: every accented or fullwidth letter is folded (a map row per run, in
Python) and marks are dropped with a larger class; linear, ~0.8 ms per KB of dense non-ASCII
text, and event fields are kilobytes. First non-ASCII text in a process also builds the
fold/mark tables from ``unicodedata`` once (~0.2 s).
"""

from __future__ import annotations

import base64
import random
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Target, emit, figure

from kernel_ext.secrets import matcher, redact_text

SIZE = 2 * 1024 * 1024
ROUNDS = 7


def texts(key: str) -> dict[str, str]:
    rng = random.Random(7)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    prose = " ".join(rng.choice(words) for _ in range(SIZE // 6))[:SIZE]
    code = "".join(f"s = '{w}\\n%d%% &amp; \\u00e9 \\x41 caf%C3%A9 a:b \u00e9\u200d'\n" for w in words)  # escapes, no secret
    world = " ".join(f"{w} caf\u00e9 na\u00efve \u4e16\u754c\u3002 \U0001f600 \uff21{w}" for w in words)  # no secret
    return {
        "prose, no secret": prose,
        "prose, 500 prefix-less echoes": _sprinkle(prose, key[3:]),
        "prose, 500 spaced-out echoes": _sprinkle(prose, " ".join(key)),
        "prose, 500 base64 echoes": _sprinkle(prose, base64.b64encode(b"x" + key.encode()).decode()),
        "code full of escapes, no secret": (code * (SIZE // len(code) + 1))[:SIZE],
        "prose, 500 percent-encoded echoes": _sprinkle(prose, "".join(f"%{b:02X}" for b in key.encode())),
        "prose, 500 u-escaped echoes": _sprinkle(prose, "".join(f"\\u{ord(c):04x}" for c in key)),
        "prose, 500 HTML-entity echoes": _sprinkle(prose, "".join(f"&#{ord(c)};" for c in key)),
        "prose, 500 echoes with U+200B every 6": _sprinkle(prose, "\u200b".join(key[i : i + 6] for i in range(0, len(key), 6))),
        "prose with accents, CJK and emoji, no secret": (world * (SIZE // len(world) + 1))[:SIZE],
        "prose, 500 double-percent echoes": _sprinkle(prose, "".join(f"%25{b:02X}" for b in key.encode())),
        "prose, 500 fullwidth echoes": _sprinkle(prose, "".join(chr(ord(c) + 0xFEE0) for c in key)),
        "prose, 500 echoes with a combining mark each": _sprinkle(prose, "".join(c + "\u0301" for c in key)),
    }


def _sprinkle(text: str, piece: str, count: int = 500) -> str:
    step = len(text) // count
    return "".join(text[i : i + step] + " " + piece + " " for i in range(0, step * count, step))


def timed(function, text: str) -> list[float]:
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        function(text)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    key = "sk-" + "".join(random.Random(1).choice(string.ascii_letters + string.digits) for _ in range(45))
    known = (key, "capability-token-5f2e9d81c4b7a6e3", "Zq8mW3nT7xVb2Lp9Hk4cR1yA")
    matcher(known)  # compiled once per run, as a run does
    figures = []
    for name, text in texts(key).items():
        ours = timed(lambda t: redact_text(t, known), text)
        old = timed(lambda t: [t := t.replace(s, "[redacted]") for s in known], text)
        left = redact_text(text, known)
        assert key[3:15] not in left.replace(" ", "") and ("echoes" not in name or "[redacted]" in left), name
        fig = figure(f"redact 2 MB: {name}", [s * 1000 for s in ours], "ms", baseline=("whole-value replace", [s * 1000 for s in old]),
                     target=Target("<", 250), group="secrets")
        print(f"{fig.name}: median {fig.median:.1f} ms (min {fig.min:.1f}, max {fig.max:.1f}); baseline {fig.baseline_median:.1f} ms")
        figures.append(fig)
    emit(figures)


if __name__ == "__main__":
    main()
