"""The frontend-intent reader is linear in the request and reads it as it did before.

Red team 2 (issue 28 second pass): ``intent._NOT_PROSE`` retried each name alternative from every
position inside a long run of word characters, so one 19,000-character request (``"x" * 19000``)
held the server's event loop 16 s (``GET config`` answered after it). A run of 48 or more
non-space characters (no word of prose) is now dropped first, so the pattern never reads a run
longer than that. These tests check that on text without such runs the reading is exactly the
old one (hypothesis, over the characters the alternatives turn on), that a long run's words are
not read, and that the pathological shapes finish within the test's own deadline; the timing
itself is measured in redteam2/FINDINGS.md, never asserted.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_ext.pipeline import intent

# The pattern as it was (main at 82059bc): the reference for what is removed.
OLD = re.compile(r"`[^`]*`|\S+://\S*|[\w-]+(?:\.[\w-]+)+|(?<!\S)/\S*|\w+:\w+")

ALPHABET = st.sampled_from([*"ab_-.:/` \nx", "app", "ui", "://", "api "])


def _read(text: str) -> str:
    """The words ``frontend_intent`` reads (its first line)."""
    return " ".join(intent._NOT_PROSE.sub(" ", intent._LONG_RUN.sub(" ", text)).split())


@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, max_size=40).map("".join).filter(lambda t: not re.search(r"\S{48}", t)))
def test_same_words_read_as_before(text: str) -> None:
    assert _read(text) == " ".join(OLD.sub(" ", text).split())


def test_a_long_run_is_not_read() -> None:
    run = "my-" + "very-" * 9 + "application"  # 59 characters, no space: no word of prose
    assert _read(f"a backend {run} please") == "a backend please"
    assert not intent.frontend_intent(f"a backend {run}").needed


def test_the_decisions_the_rules_name_still_hold() -> None:
    assert not intent.frontend_intent("https://app.example.org").needed
    assert not intent.frontend_intent("serve main_api:app from /ui/").needed
    assert intent.frontend_intent("a web app for the library").needed
    assert intent.frontend_intent("build me an app").needed
    assert not intent.frontend_intent("a FastAPI backend, `app` only backend").needed


@pytest.mark.timeout(30)  # the old pattern needs ~16 s per shape here (100 s in all); the new one ~0.1 s in all
def test_long_runs_are_read() -> None:
    """Each shape took the old pattern 16 s or more at this length (measured); a deadline, not a timing."""
    for unit in ("x", "x_", "-", "a:", "a/", "a:/"):
        text = "Generate a FastAPI backend " + unit * (19_000 // len(unit))
        assert intent.frontend_intent(text).needed is False
