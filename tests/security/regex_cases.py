"""Regular expressions a model supplies, and what each must come back as (shared by the entry points).

``^(\\w|\\w)*!`` on one 40-character line never returns on Python's ``re`` (2**40 ways to split
the line) and holds the GIL while it tries; on RE2 it answers at once. Features RE2 lacks are
refused by name (``regex_unsupported``), an over-long pattern is ``too_large``.
"""

from __future__ import annotations

from typing import Any

CATASTROPHIC = r"^(\w|\w)*!"
LINE = "a" * 40  # no "!": the backtracking engine explores every split before failing
BANG = "b" * 10 + "!"  # a line the same pattern does match (the search still works)
HAYSTACK = f"{LINE}\n{BANG}\n{LINE}\n"
HAYSTACK_FILE = "haystack.txt"
MARKER = "regex-case-ran.txt"  # a command refused at validation must leave no such file

# (label, arguments, expected error code or None, check on the result's data)
SEARCHES: list[tuple[str, dict[str, Any], str | None]] = [
    ("catastrophic", {"pattern": CATASTROPHIC, "file_glob": "*.txt"}, None),
    ("backreference", {"pattern": r"(a)\1"}, "regex_unsupported"),
    ("lookahead", {"pattern": r"a(?=a)"}, "regex_unsupported"),
    ("lookbehind", {"pattern": r"(?<=a)a"}, "regex_unsupported"),
    ("too_long", {"pattern": "a" * 5000}, "too_large"),
    ("not_a_regex", {"pattern": "(unclosed"}, "invalid_argument"),
]
DETAIL_MATCHES: list[tuple[str, str, str | None]] = [
    ("catastrophic", CATASTROPHIC, None),
    ("backreference", r"(\w)\1", "regex_unsupported"),
    ("lookbehind", r"(?<=a)!", "regex_unsupported"),
]
EXPECTS: list[tuple[str, str, str | None]] = [
    # (label, stdout_matches, expected code); the command prints HAYSTACK, or only LINE for "no_match"
    ("catastrophic", CATASTROPHIC, None),
    ("catastrophic_no_match", CATASTROPHIC, "expectation_failed"),
    ("backreference", r"(a)\1", "invalid_argument"),
]


def print_haystack() -> str:
    """A command printing ``HAYSTACK`` (the same lines the file search reads)."""
    return f"printf '%s\\n' {LINE} {BANG} {LINE}"


def expect_command(label: str) -> str:
    """The command of an ``EXPECTS`` case (a refused one would also leave ``MARKER``)."""
    if label.endswith("no_match"):
        return f"printf '%s\\n' {LINE} {LINE}"
    return print_haystack() if label.startswith("catastrophic") else f"{print_haystack()}; touch {MARKER}"


def check_search(label: str, code: str | None, ok: bool, error_code: str | None, data: dict[str, Any]) -> None:
    if code is None:
        assert ok, (label, error_code)
        found = [(m["path"].rsplit("/", 1)[-1], m["line"], m["text"]) for m in data["matches"]]
        assert found == [(HAYSTACK_FILE, 2, BANG)], (label, found)
    else:
        assert not ok and error_code == code, (label, error_code)


def check_detail(label: str, code: str | None, ok: bool, error_code: str | None, data: dict[str, Any]) -> None:
    if code is None:
        assert ok, (label, error_code)
        assert data["matches"] == 1 and data["lines"] == [f"2: {BANG}"], data
    else:
        assert not ok and error_code == code, (label, error_code)


def check_expect(label: str, code: str | None, ok: bool, error_code: str | None, message: str) -> None:
    if code is None:
        assert ok and "assert_ok" in message, (label, error_code, message[:300])
        return
    assert not ok and error_code == code, (label, error_code, message[:300])
    if code == "invalid_argument":
        assert "regex_unsupported" in message, message
