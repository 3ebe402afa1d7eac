"""The command policy's splitter and scans: shlex's words, in time linear in the command.

``split_words`` replaced ``shlex.shlex(posix=True, punctuation_chars=True)`` (quadratic on one
long word: 64 Ki characters took ~20 s); the denylist and ``sh_plan``'s scans moved to RE2
(``shellplan.scan``), where ``\\bdd\\b[^;&|]*`` over ``dd dd dd ...`` and the fork-bomb pattern over one
long word took 13 s to minutes. Work is compared as a ratio of N and 4N characters measured in
the same run (linear reads ~4x, quadratic ~16x), never as a wall-clock bound; the pauses of the
collector are the loop-lag test's business (tests/security/test_sec_loop_lag.py).
"""

from __future__ import annotations

import gc
import shlex
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.shellplan.denylist import (
    MAX_COMMAND_CHARS,
    check_command,
    split_command,
)
from kernel_ext.shellplan.plan import classify
from kernel_ext.shellplan.scan import fork_bomb
from kernel_ext.shellplan.words import SplitError, split_words

# every character the splitter treats specially, and a few it must not
ALPHABET = list(" \t\r\n'\"\\;|&()<>#$=~-./*?x1é\x0b")


def shlex_words(command: str) -> list[str] | tuple[str, str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as exc:
        return ("error", str(exc))


def our_words(command: str) -> list[str] | tuple[str, str]:
    try:
        return split_words(command)
    except SplitError as exc:
        return ("error", str(exc))


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=st.sampled_from(ALPHABET), max_size=24))
def test_the_splitter_agrees_with_shlex(command):
    assert our_words(command) == shlex_words(command)


@pytest.mark.parametrize("command", ["a ''", "'' ;''", 'a"b\\"c\\d"e', "x\\ y", "a;;b&&c|d", "#x", "''", "a\\\nb"])
def test_the_splitter_agrees_with_shlex_on_edges(command):
    assert our_words(command) == shlex_words(command)


@pytest.mark.parametrize(("command", "reason"), [("echo 'open", "No closing quotation"), ('echo "a\\', "No escaped character"),
                                                 ("echo a\\", "No escaped character"), ('echo "open', "No closing quotation")])
def test_an_unsplittable_command_is_refused_by_name(command, reason):
    with pytest.raises(ToolFailure) as refused:
        split_command(command)
    assert (refused.value.code, refused.value.message) == (
        ErrorCode.INVALID_ARGUMENT, f"the command cannot be parsed as a shell would: {reason}")
    assert shlex_words(command) == ("error", reason)


@pytest.mark.parametrize(("command", "bomb"), [(":(){ :|:& };:", True), ("bomb(){ bomb|bomb& };bomb", True),
                                               ("f () { f | f & }", True), ("a:(){ :|:& }", True),
                                               ("xf(){ f|f& }", False), ("f(){ g|f& }", False), ("f(){ f|f; }", False)])
def test_the_fork_bomb_check_compares_the_names(command, bomb):
    assert fork_bomb(command) is bomb
    assert classify(command).category == "destructive" if bomb else True


# -- linear work -------------------------------------------------------------------------------


def _min_time(fn: Callable[[str], object], text: str, repeats: int) -> float:
    """CPU time of this thread (other load does not count), collector off: the algorithm's work alone."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.thread_time()
            try:
                fn(text)
            except (ToolFailure, SplitError):
                pass
            best = min(best, time.thread_time() - start)
    finally:
        gc.enable()
    return best


def _ratio(fn: Callable[[str], object], piece: str, size: int, repeats: int = 7) -> float:
    """Time of ``size`` characters over time of a quarter (the fastest of ``repeats`` each: load only adds)."""
    big = (piece * size)[:size]
    small = big[: size // 4]
    return _min_time(fn, big, repeats) / max(_min_time(fn, small, repeats), 1e-6)


SHAPES = {"one word": "a", "short words": "dd ", "quotes": "''", "double quotes": '"\\""', "backslashes": "\\a",
          "punctuation": ";", "punctuation and words": "a;", "fork-bomb shapes": "f(){ f|f& };", "download shapes": "curl ",
          "open quote": "'" + "a" * 7}


@pytest.mark.parametrize("piece", SHAPES.values(), ids=SHAPES.keys())
def test_splitting_is_linear_in_the_length(piece):
    # not capped itself: 256 Ki against 64 Ki characters (the old shlex split took ~20 s at 64 Ki)
    assert _ratio(split_words, piece, 4 * MAX_COMMAND_CHARS) < 10


@pytest.mark.parametrize("piece", SHAPES.values(), ids=SHAPES.keys())
def test_the_policy_and_the_plan_are_linear_up_to_the_cap(piece):
    assert _ratio(check_command, piece, MAX_COMMAND_CHARS) < 10
    assert _ratio(classify, piece, MAX_COMMAND_CHARS, repeats=3) < 10  # up to ~1 s a call: fewer repeats


def test_the_cap_is_the_tools_cap_and_comes_before_any_split():
    from kernel_ext.sandbox.shtools.options import MAX_COMMAND_CHARS as tools_cap

    assert MAX_COMMAND_CHARS == tools_cap
    with pytest.raises(ToolFailure) as refused:
        check_command("'" * (MAX_COMMAND_CHARS + 1))  # unsplittable, but refused for its length first
    assert refused.value.message == f"the command is longer than {MAX_COMMAND_CHARS} characters"
