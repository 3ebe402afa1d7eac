"""What looks like a secret, and how to remove it before it can travel.

One definition serves every layer: the sandbox strips secret-named variables from tool
environments, events and reports redact secret-named fields and known secret values, and
request reports hide credentials. Redaction happens before an event is built, so nothing
downstream (widgets, notebooks, logs, ``events.jsonl``) ever holds the value.

A known secret is cut whole and in part: any run of ``FRAGMENT_CHARS`` or more consecutive
characters of it (an endpoint that echoes the key without its ``sk-`` prefix, a model that
quotes half of it), however it is written: the text is read as ``kernel_ext.unmask`` spells it
(percent-encoding of any byte, ``\\uXXXX`` / ``\\xNN`` / octal escapes, HTML entities and
``0x74`` bytes decoded, nested ones too; fullwidth, mathematical and accented letters folded to
ASCII, tag characters read as ASCII; invisible characters, combining marks, non-ASCII spaces and
separators such as whitespace, ``+ - _ . , " ' :`` dropped), so a key percent-encoded twice,
written as entities, in fullwidth letters or with a zero-width character every few characters
is still one run. Its common encodings are cut the same way,
from runs of ``encoded_fragment`` characters: reversed, hex (lower and upper case, also split by
colons or spaces) and standard and URL-safe base64 at each of the three byte alignments (so a
piece of a longer encoded text counts too). Secrets shorter than the fragment are cut whole,
in every form. ``SecretMatcher`` does it in one linear-time pass (RE2 over the grams of every
form, then extension along the form), compiled once per set of secrets, and a cut is mapped
back onto the text as written, whole escapes and characters. The boundary refuses a call whose
arguments hold any of it (``SECRET_IN_ARGUMENTS``), with the same matcher.

Limits, honestly: this catches echoes and careless quotes, not a determined exfiltration. A
model that knows a key can always spell it some way no list of encodings covers (every other
character, ROT13, a cipher of its own, one character per call). The defence that holds is
structural: keys never reach the model (the provider sends them as headers only, tool
environments have secret-named variables stripped, and nothing a tool returns holds them).
What is here keeps an endpoint's echo of a key out of events, logs and the app.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kernel_ext.safetext import DEEP, WALK_DEPTH
from kernel_ext.unmask import SEPARATORS, Reading, encode, spelled

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


# The last piece of a name that describes a credential instead of holding it: ``token_type``
# ("bearer"), ``key_kind``, ``token_expires_in``, ``secret_length``. Such a field is kept when its
# value is short and word-like; a value shaped like a credential is redacted whatever the name,
# and every value still passes the value rules (known secrets, key shapes, bearer credentials).
DESCRIPTOR_PARTS = frozenset({
    "TYPE", "KIND", "EXPIRES", "EXPIRY", "EXPIRATION", "TTL", "LIFETIME", "LENGTH", "LEN", "SIZE", "COUNT",
    "FORMAT", "SCHEME", "ALG", "ALGORITHM", "USAGE", "VERSION",
})
_TRAILING = ("IN", "AT")  # token_expires_in, key_expires_at
_DENSE_RUN = re.compile(r"[A-Za-z0-9+/=_-]{16,}")


def describes_secret(name: str) -> bool:
    """True for a secret-sounding name whose last piece names a property (``token_type``)."""
    pieces = [p.upper() for p in _NAME_SPLIT.split(name) if p]
    while len(pieces) > 1 and pieces[-1] in _TRAILING:
        pieces.pop()
    return len(pieces) > 1 and pieces[-1] in DESCRIPTOR_PARTS


def _word_like(value: str) -> bool:
    """Short, and no dense run that mixes letters and digits (what a key, token or hash looks like)."""
    if len(value) > 64 or _KEY_SHAPES.search(value) or _BEARER.search(value):
        return False
    return not any(any(c.isdigit() for c in run) and any(c.isalpha() for c in run) for run in _DENSE_RUN.findall(value))


def is_secret_field(name: str, value: Any) -> bool:
    """Whether a named field's value is withheld for its name: a secret name (``is_secret_name``),
    unless the name only describes a credential and the value is word-like (``token_type: bearer``)."""
    if not is_secret_name(name):
        return False
    return not (describes_secret(name) and isinstance(value, str) and _word_like(value))


FRAGMENT_CHARS = 12  # a run this long of a known secret is cut; shorter secrets are cut whole
SHORTEST_SECRET = 6  # below this a "secret" would blank common words: not matched at all
MAX_CUTS = 1000  # past this many hits in one text, the whole text is withheld (bounded time)
def encoded_fragment(fragment: int) -> int:
    """The run of an encoded form (hex, base64, percent) that is cut: a third longer than a plain
    piece, as those alphabets carry fewer bits a character (12 -> 16, 8 -> 10)."""
    return fragment + fragment // 3


def forms(secret: str) -> list[tuple[bytes, bool]]:
    """``secret`` and its common encodings, each with whether it is an encoding (longer bound).

    As written and reversed (both as ``unmask.spelled`` reads them); hex lower and upper case;
    standard and URL-safe base64 at the three byte alignments a secret inside a longer encoded
    text can have (padding kept, so a cut takes it too). Percent-encoding, escapes and entities
    need no form of their own: the text is read decoded.
    """
    import base64

    raw, plain = encode(secret), encode(spelled(secret))
    found: list[tuple[bytes, bool]] = [(plain, False), (plain[::-1], False), (raw.hex().encode(), True), (raw.hex().upper().encode(), True)]
    for skip in range(3):
        encoded = base64.b64encode(raw[skip:])
        found += [(encoded, True), (encoded.translate(bytes.maketrans(b"+/", b"-_")), True)]
    return found


class SecretMatcher:
    """Finds known secrets, whole or as fragments of ``fragment`` characters or more, in text.

    Linear in the text. The text is read as ``unmask.Reading`` spells it (escapes decoded,
    invisible characters and ``SEPARATORS`` dropped, so ``s k - a b c``, ``sk+abc`` and
    ``&#115;&#107;%61bc`` are all seen as ``skabc``); one RE2 pass finds any gram of a secret or
    of one of its encodings there (a literal alternation: a small automaton, built once per set
    of secrets by ``matcher``), each hit is extended as far as the text keeps following that
    form, and the spans are mapped back onto the original text, separators inside included.

    A gram is as long as the fewest non-separator characters any ``fragment``-long window of the
    form holds (``sk-abc`` loses its ``-``), so every ``fragment``-character piece of the secret
    as written is still caught.
    """

    def __init__(self, secrets: Iterable[str], fragment: int = FRAGMENT_CHARS, shortest: int = SHORTEST_SECRET):
        self.fragment = fragment
        self._grams: dict[bytes, list[tuple[bytes, int]]] = {}  # gram -> (form, offset after the gram)
        alternatives: set[bytes] = set()
        for secret in {s for s in secrets if isinstance(s, str) and len(s) >= shortest}:
            short = len(encode(secret)) < fragment
            for form, encoded in forms(secret):
                window = encoded_fragment(fragment) if encoded else fragment
                dense = form.translate(None, SEPARATORS)
                if short or len(form) < window:  # a short secret: each form is cut whole
                    whole = dense.rstrip(b"=") if encoded else dense  # base64 padding is optional; a secret's own "=" is not
                    if len(whole) >= 4:
                        alternatives.add(whole)
                    continue
                size = max(_fewest_kept(form, window), window * 2 // 3)
                for start in range(len(dense) - size + 1):
                    gram = dense[start : start + size]
                    alternatives.add(gram)
                    self._grams.setdefault(gram, []).append((dense, start + size))
        self._pattern = _compile(b"|".join(_literal(a) for a in sorted(alternatives))) if alternatives else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def found(self, text: str) -> bool:
        """True when ``text`` holds a known secret, a fragment of one, or of one of its encodings."""
        return self._pattern is not None and self._pattern.search(Reading(text).dense) is not None

    def cut(self, text: str) -> str:
        """``text`` with every secret and fragment replaced by ``REDACTED``."""
        if self._pattern is None or not text:
            return text
        reading = Reading(text)
        dense = reading.dense
        match = self._pattern.search(dense)
        if match is None:  # the common case: one pass, nothing else
            return text
        spans: list[tuple[int, int]] = []
        hits = 0
        while match is not None:
            hits += 1
            start, end = match.span()
            matched = end
            for form, offset in self._grams.get(dense[start:matched], ()):
                end = max(end, _follow(dense, matched, form, offset))
            if spans and start <= spans[-1][1]:  # adjacent (a repeated key): one cut
                start = spans.pop()[0]
            spans.append((start, end))
            if hits > MAX_CUTS:  # a text made of secret pieces: nothing of it is worth keeping
                return f"{REDACTED} (a text of {len(text)} characters holding over {MAX_CUTS} pieces of a known secret)"
            match = self._pattern.search(dense, end)
        pieces: list[str] = []
        last = 0
        for start, end in reading.spans(spans):
            if pieces and start < last:  # two pieces met inside one character or escape
                last = max(end, last)
                continue
            pieces += [text[last:start], REDACTED]
            last = end
        pieces.append(text[last:])
        return "".join(pieces)


def _fewest_kept(form: bytes, window: int) -> int:
    """The fewest non-separator bytes in any ``window``-long run of ``form`` (one sliding pass)."""
    kept = [c not in SEPARATORS for c in form]
    count = fewest = sum(kept[:window])
    for i in range(window, len(kept)):
        count += kept[i] - kept[i - window]
        fewest = min(fewest, count)
    return fewest


def _follow(dense: bytes, at: int, secret: bytes, offset: int) -> int:
    """Where the text stops spelling ``secret`` (from ``offset``) after ``at``: O(log n) compares.

    A secret spelled again whole right after itself (a repeated key) is followed on in one step
    each. Once the secret has ended, a partial start of it is left alone (the next search cuts
    it if it is long enough): otherwise the character after a cut that merely equals the key's
    first one would be swallowed.
    """
    if dense.startswith(secret[offset:], at):
        at += len(secret) - offset
        while dense.startswith(secret, at):
            at += len(secret)
        return at
    low, high = 0, min(len(secret) - offset, len(dense) - at)
    while low < high:
        middle = (low + high + 1) // 2
        if dense.startswith(secret[offset : offset + middle], at):
            low = middle
        else:
            high = middle - 1
    return at + low


@functools.lru_cache(maxsize=64)
def _matcher(secrets: tuple[str, ...], fragment: int, shortest: int) -> SecretMatcher:
    return SecretMatcher(secrets, fragment, shortest)


def matcher(known: Iterable[str], *, fragment: int = FRAGMENT_CHARS, shortest: int = SHORTEST_SECRET) -> SecretMatcher:
    """The (cached) matcher for ``known``: a run's secrets are compiled once, not per event."""
    return _matcher(tuple(sorted({s for s in known if isinstance(s, str) and s})), fragment, shortest)


def _literal(raw: bytes) -> bytes:
    """``raw`` as an RE2 pattern matching exactly those bytes."""
    return b"".join(bytes([c]) if chr(c).isalnum() and c < 128 else b"\\x%02x" % c for c in raw)


def _compile(pattern: bytes) -> Any:
    import re2  # lazy, like safe_regex: only text with known secrets pays for it

    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1  # byte semantics: fragments may split a character
    options.max_mem = 64 << 20
    options.log_errors = False
    return re2.compile(pattern, options)


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """Replace known secret values (whole or in part), bearer credentials and key-shaped strings."""
    text = matcher(known).cut(text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return _KEY_SHAPES.sub(REDACTED, text)


def redact(value: Any, known: Iterable[str] = (), *, by_name: bool = True) -> Any:
    """A deep copy of ``value`` with secret-named string fields and secret-looking strings redacted.

    Keys are text too: a credential used as a JSON key, a header name or a tool-argument name
    (the model chooses those) is rewritten like any other string. Two keys that redact alike
    stay apart (``[redacted]``, ``[redacted]#2``), so no value is lost by the rewrite.
    ``by_name=False`` cuts by value only (an export's data: a file named ``auth.py`` keeps its hash).
    """
    return _redact(value, tuple(known), 0, by_name)


def _redact(value: Any, known: tuple[str, ...], depth: int, by_name: bool = True) -> Any:
    """``redact`` to ``safetext.WALK_DEPTH`` levels; a deeper subtree becomes ``safetext.DEEP`` (no
    nesting a model sends can exhaust the recursion limit while an event is built)."""
    if isinstance(value, (dict, list, tuple)) and depth >= WALK_DEPTH:
        return DEEP
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            secret_field = by_name and isinstance(key, str) and isinstance(item, str) and item and is_secret_field(key, item)
            out[_free_key(redact_key(key, known), out)] = REDACTED if secret_field else _redact(item, known, depth + 1, by_name)
        return out
    if isinstance(value, (list, tuple)):
        return [_redact(item, known, depth + 1, by_name) for item in value]
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
