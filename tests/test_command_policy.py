"""The command policy's own checks, each refusal with its code and its words (mutation testing found them unpinned).

The denylist is exercised through the tools in ``test_sandbox_tools``; here: empty, too long,
NUL, the program list's message, and how a command is split into words.
"""

from __future__ import annotations

import pytest

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.shellplan.denylist import (
    MAX_COMMAND_CHARS,
    check_command,
    split_command,
)


def refusal(command, programs=None) -> ToolFailure:
    with pytest.raises(ToolFailure) as refused:
        check_command(command, programs)
    return refused.value


@pytest.mark.parametrize("command", [None, "", "   \n\t"])
def test_an_empty_command_is_refused_by_name(command):
    failure = refusal(command)
    assert (failure.code, failure.message) == (ErrorCode.INVALID_ARGUMENT, "the command is empty")


def test_the_length_limit_is_inclusive():
    # short words: shlex builds one long word in quadratic time (64 Ki characters take seconds)
    longest = "echo" + " ab" * ((MAX_COMMAND_CHARS - 4) // 3)
    assert len(longest) == MAX_COMMAND_CHARS
    assert check_command(longest)[:2] == ["echo", "ab"]
    failure = refusal(longest + "a")
    assert (failure.code, failure.message) == (
        ErrorCode.INVALID_ARGUMENT, f"the command is longer than {MAX_COMMAND_CHARS} characters")


def test_a_nul_byte_is_refused_by_name():
    failure = refusal("echo a\x00b")
    assert (failure.code, failure.message) == (ErrorCode.INVALID_ARGUMENT, "the command contains a NUL byte")


@pytest.mark.parametrize(("command", "programs", "message"), [
    ("evil --now", {"python", "pytest"}, "'evil' is not on this server's program list (pytest, python); only the first word is checked"),
    ("evil", set(), "'evil' is not on this server's program list (none); only the first word is checked"),
    ("A=1 B=2", {"pytest"}, "'A=1' is not on this server's program list (pytest); only the first word is checked"),
])
def test_the_program_list_refusal_names_the_program_and_the_list(command, programs, message):
    failure = refusal(command, programs)
    assert (failure.code, failure.message) == (ErrorCode.PROGRAM_NOT_ALLOWED, message)


def test_commands_split_as_a_posix_shell_would():
    words = split_command("FOO='a b' pytest -k \"x y\" aXb; ls|wc -l # not a comment here")
    assert words == ["FOO=a b", "pytest", "-k", "x y", "aXb", ";", "ls", "|", "wc", "-l", "#", "not", "a", "comment",
                     "here"]
    assert split_command("scp a@b:c +x 50%") == ["scp", "a@b:c", "+x", "50%"]  # words end at whitespace only
    assert check_command("PYTHONPATH=. pytest -q", {"pytest"}) == ["PYTHONPATH=.", "pytest", "-q"]


def test_unsplittable_and_empty_splits_are_refused_by_name():
    with pytest.raises(ToolFailure) as unbalanced:
        split_command("echo 'open")
    assert unbalanced.value.code == ErrorCode.INVALID_ARGUMENT
    assert unbalanced.value.message.startswith("the command cannot be parsed as a shell would: ")
    with pytest.raises(ToolFailure) as empty:
        split_command("  ")
    assert (empty.value.code, empty.value.message) == (ErrorCode.INVALID_ARGUMENT, "the command is empty")
