"""The known-secret matcher, rule by rule (mutation testing of ``kernel_ext.secrets`` found these unpinned).

What is cut, and exactly what: every run of ``FRAGMENT_CHARS`` of a secret, reversed or as written
with separators, every run of ``encoded_fragment`` of each encoding, a short secret whole in every
form, a cut that ends inside a character; and what stays: shorter runs, ordinary text, a text of
a thousand pieces cut piece by piece. The forms are written out here on their own (not taken from
``kernel_ext.secrets.forms``), so a form the matcher forgot fails.
"""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import quote

import pytest

from kernel_ext.secrets import (
    FRAGMENT_CHARS,
    MAX_CUTS,
    REDACTED,
    SecretMatcher,
    encoded_fragment,
    matcher,
    redact_text,
)

pytestmark = pytest.mark.usefixtures("fresh_secret_matchers")

PLAIN = "Zq8mW3nT7xVb2Lp9Hk4cR1yAt5Gu"  # 28 characters; none of its encodings holds a separator
SPLIT = "Zq8mW3nT7xV-b2Lp9Hk4cR1yA"  # one separator: a 12-character run of it may hold 11 kept
SLASHED = "Zq8/mW3/nT7/xVb/2Lp/9Hk"  # its percent-encoding differs from it
ENCODED = encoded_fragment(FRAGMENT_CHARS)


def b64(data: bytes, urlsafe: bool = False) -> str:
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()


def runs(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(len(text) - size + 1)]


def encoded_forms(secret: str) -> dict[str, str]:
    """Each encoding of ``secret`` without its last group (what follows the key changes that one)."""
    raw = secret.encode()
    found = {"hex": raw.hex(), "HEX": raw.hex().upper()}
    for skip in range(3):
        found[f"base64+{skip}"] = b64(raw[skip:])[:-4]
        found[f"urlsafe+{skip}"] = b64(raw[skip:], urlsafe=True)[:-4]
    return found


def only_cut(text: str, cut: str) -> bool:
    """``cut`` kept the text's frame (``<`` ... ``>``) and nothing of the key: no letter or digit."""
    return cut.startswith("<") and cut.endswith(">") and REDACTED in cut and not any(
        c.isalnum() for c in cut.replace(REDACTED, ""))


# -- plain pieces: from twelve characters on, cut exactly --------------------------------------

@pytest.mark.parametrize("secret", [PLAIN, PLAIN + "Jf6Ks2"], ids=["28", "34"])
@pytest.mark.parametrize("direction", ["as-written", "reversed"])
def test_every_run_of_twelve_or_more_is_cut_exactly_and_eleven_stay(secret, direction):
    spelled = secret if direction == "as-written" else secret[::-1]
    for size in range(FRAGMENT_CHARS, len(spelled) + 1):
        for piece in runs(spelled, size):
            assert redact_text(f"<{piece}>", (secret,)) == f"<{REDACTED}>", piece
    for piece in runs(spelled, FRAGMENT_CHARS - 1):
        assert redact_text(f"<{piece}>", (secret,)) == f"<{piece}>", piece
        assert not matcher((secret,)).found(piece)


def test_a_secret_with_a_separator_is_cut_from_every_twelve_characters_as_written():
    """``SPLIT`` keeps 11 characters in some 12-character runs: its pieces are 11 kept characters long."""
    for spelled in (SPLIT, SPLIT[::-1]):
        for piece in runs(spelled, FRAGMENT_CHARS):
            assert only_cut(f"<{piece}>", redact_text(f"<{piece}>", (SPLIT,))), piece
        for piece in runs(spelled.replace("-", ""), FRAGMENT_CHARS - 2):  # ten kept: under every piece
            assert redact_text(f"<{piece}>", (SPLIT,)) == f"<{piece}>", piece


def test_a_secret_spelled_with_a_separator_between_every_character_is_cut_from_eight():
    """A 12-character run of it keeps 6; the floor of a piece is two thirds of 12, so 8 kept are cut."""
    dashed = "-".join("Zq8mW3nT7xVb2Lp9")
    core = dashed.replace("-", "")
    for piece in runs(core, 8):
        assert redact_text(f"<{piece}>", (dashed,)) == f"<{REDACTED}>", piece
    for piece in runs(core, 7):
        assert redact_text(f"<{piece}>", (dashed,)) == f"<{piece}>", piece
    assert redact_text(f"<{dashed}>", (dashed,)) == f"<{REDACTED}>"


# -- encodings: from sixteen characters on ------------------------------------------------------

@pytest.mark.parametrize("name", list(encoded_forms(PLAIN)))
def test_every_run_of_sixteen_of_an_encoding_is_cut_and_fifteen_stay(name):
    form = encoded_forms(PLAIN)[name]
    for piece in runs(form, ENCODED):
        assert redact_text(f"<{piece}>", (PLAIN,)) == f"<{REDACTED}>", piece
    for piece in runs(form, ENCODED - 1):
        assert redact_text(f"<{piece}>", (PLAIN,)) == f"<{piece}>", piece
        assert not matcher((PLAIN,)).found(piece)


def test_percent_encoding_is_read_decoded_and_cut_from_twelve_characters():
    """Percent-encoding is decoded before matching (``kernel_ext.unmask``): a piece is cut when it
    spells twelve characters of the secret, however long it is as written, and the cut takes its
    escapes whole; eleven stay, whether encoded only where needed or byte by byte."""
    assert redact_text(f"url?k={quote(SLASHED, safe='')}&n=1", (SLASHED,)) == f"url?k={REDACTED}&n=1"
    for size, cut in ((FRAGMENT_CHARS, True), (FRAGMENT_CHARS - 1, False)):
        for piece in runs(SLASHED, size):
            for encoded in (quote(piece, safe=""), "".join(f"%{b:02x}" for b in piece.encode())):
                assert redact_text(f"<{encoded}>", (SLASHED,)) == (f"<{REDACTED}>" if cut else f"<{encoded}>"), encoded


def test_url_safe_base64_is_cut_where_it_differs_from_the_standard_alphabet():
    secret = "Zq?mW?nT?xV?2L?9H?4c?1y?"  # each "?" ends a 3-byte group: "/" in base64, "_" URL-safe
    raw = secret.encode()
    assert b64(raw).count("/") == 8 and b64(raw, urlsafe=True).count("_") == 8
    for skip in range(3):
        text = f"<{b64(raw[skip:], urlsafe=True)}>"
        assert only_cut(text, redact_text(text, (secret,))), text


def test_a_twelve_character_secret_is_cut_in_pieces_of_its_encodings():
    """Twelve characters are not short: a run of 16 of its hex is cut like any other secret's."""
    secret = PLAIN[:FRAGMENT_CHARS]
    for piece in runs(secret.encode().hex(), ENCODED):
        assert redact_text(f"<{piece}>", (secret,)) == f"<{REDACTED}>", piece


def test_a_cut_of_base64_takes_its_padding():
    """A 12-character secret after one byte: its last aligned 10 bytes encode to 16 characters
    ending in "==", exactly one piece long; the cut takes the padding too."""
    secret = PLAIN[:FRAGMENT_CHARS]
    text = b64(b"x" + secret.encode())
    assert text.endswith("==") and redact_text(f"b64={text};", (secret,)) == f"b64={text[:4]}{REDACTED};"


# -- short secrets: cut whole, in every form ----------------------------------------------------

SHORT = ["Zq8mW3nT7xV", "hunter2!", "pw/1234X", "Zm9vYmE="]  # 6 to 11 characters


def short_forms(secret: str) -> dict[str, str]:
    raw = secret.encode()
    found = {"plain": secret, "reversed": secret[::-1], "hex": raw.hex(), "HEX": raw.hex().upper(),
             "base64": b64(raw), "base64-unpadded": b64(raw).rstrip("="), "urlsafe": b64(raw, urlsafe=True).rstrip("=")}
    if quote(secret, safe="") != secret:
        found["percent"] = quote(secret, safe="")
    return found


@pytest.mark.parametrize("secret", SHORT)
def test_a_short_secret_is_cut_whole_in_every_form(secret):
    for name, form in short_forms(secret).items():
        cut = redact_text(f"<{form}>", (secret,))
        padding = form[len(form.rstrip("=")):] if name.startswith("base64") else ""  # a short form's padding may stay
        assert cut in (f"<{REDACTED}>", f"<{REDACTED}{padding}>"), (name, cut)


@pytest.mark.parametrize("secret", SHORT)
def test_a_short_secret_is_cut_only_whole(secret):
    raw = secret.encode()
    for piece in (secret[:-1], secret[1:], raw[:-1].hex(), b64(raw[:-1])):
        assert redact_text(f"<{piece}>", (secret,)) == f"<{piece}>", piece


def test_a_short_secrets_own_equals_sign_is_cut_with_it_and_other_words_stay():
    """Bug found by the mutants: the "=" of base64 padding was also stripped from the secret as
    written, so ``Zm9vYmE=`` left its "=" behind and cut ``Zm9vYmE`` out of any word."""
    assert redact_text("token=Zm9vYmE= ok", ("Zm9vYmE=",)) == f"token={REDACTED} ok"
    assert redact_text("Zm9vYmEx and Zm9vYmE", ("Zm9vYmE=",)) == "Zm9vYmEx and Zm9vYmE"


def test_a_secret_of_six_is_cut_even_when_separators_leave_four_kept():
    assert redact_text("pin=q-7-x-2;", ("q-7-x-2",)) == f"pin={REDACTED};"


# -- where a cut starts and ends ----------------------------------------------------------------

# ж is D0 B6 in UTF-8 (not é: an accented Latin letter is read as its ASCII base, unmask's fold)
UNICODE = "Zq8mW3nT7xVbж2Lp9Hk4cR1yA"


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param(f"x {UNICODE} y", f"x {REDACTED} y", id="whole"),
    pytest.param(f"x {UNICODE[5:20]} y", f"x {REDACTED} y", id="piece-across-the-character"),
    # з (D0 B7) shares ж's first byte: the run ends inside it, the cut takes the whole character
    pytest.param(f"x {UNICODE[:12]}з y", f"x {REDACTED} y", id="ends-inside-a-character"),
    # Ӷ (D3 B6) shares ж's second byte: the run starts inside it, the cut takes the whole character
    pytest.param(f"x Ӷ{UNICODE[13:]} y", f"x {REDACTED} y", id="starts-inside-a-character"),
    pytest.param(f"Ӷ{UNICODE[13:]} y", f"{REDACTED} y", id="starts-inside-the-first-character"),
])
def test_a_cut_of_a_non_ascii_secret_takes_whole_characters(text, expected):
    assert redact_text(text, (UNICODE,)) == expected


def test_an_accented_letter_is_read_as_its_base_on_both_sides():
    """unmask folds é to e in the key and the text alike; ĩ next to the run is not taken."""
    key = "Zq8mW3nT7xVbé2Lp9Hk4cR1yA"
    assert redact_text(f"x ĩ{key[:12]}e{key[13:]} y", (key,)) == f"x ĩ{REDACTED} y"
    assert redact_text(f"x {key[:12]}ê y", (key,)) == f"x {REDACTED} y"


def test_pieces_next_to_each_other_are_one_cut():
    text = f"x{PLAIN[:14]}{PLAIN[5:19]}{PLAIN[::-1]}y"
    assert redact_text(text, (PLAIN,)) == f"x{REDACTED}y"


def test_a_key_repeated_back_to_back_many_times_is_one_cut():
    assert redact_text(f"x{PLAIN * (2 * MAX_CUTS)}y", (PLAIN,)) == f"x{REDACTED}y"


def test_up_to_max_cuts_pieces_are_cut_one_by_one_and_more_withhold_the_text():
    piece = PLAIN[4:17]
    assert redact_text("!".join([piece] * MAX_CUTS), (PLAIN,)) == "!".join([REDACTED] * MAX_CUTS)
    withheld = redact_text("!".join([piece] * (MAX_CUTS + 1)), (PLAIN,))
    assert withheld.startswith(REDACTED) and f"over {MAX_CUTS} pieces" in withheld and piece not in withheld


# -- the pattern itself -------------------------------------------------------------------------

def test_a_secret_made_of_regex_characters_is_matched_literally():
    secret = "Zq8m(W3nT|7xVb)2Lp*9Hk?[a]{2}^$\\"
    assert redact_text(f"<{secret}>", (secret,)) == f"<{REDACTED}>"
    assert redact_text("<Zq8mW3nT2Lp9Hkaa>", (secret,)) == "<Zq8mW3nT2Lp9Hkaa>"  # what the characters would mean


def test_fifty_known_secrets_are_each_cut():
    """A run may know many secrets: the one pattern over all their pieces still compiles."""
    keys = [b64(hashlib.sha256(str(i).encode()).digest()[:24]) for i in range(50)]
    found = SecretMatcher(keys)
    for key in keys:
        assert only_cut(f"<{key}>", found.cut(f"<{key}>")), key


def test_known_values_that_are_not_text_are_ignored():
    assert redact_text(f"<{PLAIN}>", (PLAIN, 42, b"bytes", None, "")) == f"<{REDACTED}>"
