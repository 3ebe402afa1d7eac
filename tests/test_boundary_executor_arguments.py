"""The Executor's first step, exactly: arguments as sent (size, JSON, depth, text no tool can
use) and a known secret of the run anywhere in them, each refused by name before any policy,
card or write. Split from ``test_boundary_executor_edges.py``; the same pins of surviving
mutants (``make mutation``, bench/MUTATION.md). Real workspace, real files.
"""
from __future__ import annotations

import boundary_fixtures
import pytest
from boundary_fixtures import EDIT, executor

from kernel_ext.boundary import Executor, ToolCall
from kernel_ext.tools.base import (
    Category,
    ToolArgs,
    ToolContext,
    ToolOutcome,
    ToolSpec,
)
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace import Workspace

# -- arguments as sent: size, JSON, depth, text no tool can use ---------------------------------


class NoArgs(ToolArgs):
    pass


def _noargs_spec(seen: list) -> ToolSpec:
    return ToolSpec("noargs", Category.READ, NoArgs, "x", lambda a, c: seen.append(a) or ToolOutcome("ran"))


def test_arguments_as_text_are_parsed_and_none_means_no_arguments(project):
    seen: list = []
    ex = executor(project, *boundary_fixtures.TOOLS, _noargs_spec(seen))
    read = ex.execute_sync(ToolCall("c1", "peek", '{"path": "app.py"}'))
    assert read.ok and read.observation == "print('hello')\n"
    assert ex.execute_sync(ToolCall("c2", "noargs", None)).ok
    assert ex.execute_sync(ToolCall("c3", "noargs", "  \n")).ok
    assert len(seen) == 2
    listed = ex.execute_sync(ToolCall("c4", "noargs", "[1, 2]"))
    assert listed.error.code == "invalid_json" and listed.error.message == "arguments must be a JSON object, got list"


def test_the_argument_size_limit_is_two_mebibytes_inclusive(project):
    from kernel_ext.boundary.executor import MAX_ARGUMENT_BYTES

    assert MAX_ARGUMENT_BYTES == 2 * 1024 * 1024
    ex = executor(project, *boundary_fixtures.TOOLS)
    frame = '{"path": "app.py", "pad": ""}'
    at_limit = frame.replace('""', '"' + "x" * (MAX_ARGUMENT_BYTES - len(frame)) + '"')
    assert len(at_limit.encode()) == MAX_ARGUMENT_BYTES
    inside = ex.execute_sync(ToolCall("c1", "peek", at_limit))
    assert inside.error.code == "invalid_argument" and inside.error.message == "peek: unknown argument 'pad'"
    over = ex.execute_sync(ToolCall("c2", "peek", at_limit.replace('"pad": "', '"pad": "x')))
    assert over.error.code == "invalid_argument" and over.error.message == "arguments exceed 2097152 bytes"


def nested(depth: int) -> dict:
    """A dict that is ``depth`` levels deep, counting itself."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"x": value}
    return value


TOO_DEEP = "arguments nest arrays or objects more than 64 levels deep; no tool accepts that"


@pytest.mark.parametrize("as_text", [False, True])
def test_arguments_deeper_than_64_levels_are_refused_by_name(project, as_text):
    import json

    ex = executor(project, *boundary_fixtures.TOOLS)

    def call(arguments):
        return ex.execute_sync(ToolCall("c1", "peek", json.dumps(arguments) if as_text else arguments))

    at_limit = call({"path": "app.py", **nested(64)})  # the arguments object itself is level 1
    assert at_limit.error.code == "invalid_argument" and at_limit.error.message == "peek: unknown argument 'x'"
    over = call({"path": "app.py", **nested(65)})
    assert over.error.code == "arguments_too_deep" and over.error.message == TOO_DEEP


def test_nesting_past_what_the_parser_follows_is_refused_by_the_same_name(project):
    result = executor(project, *boundary_fixtures.TOOLS).execute_sync(ToolCall("c1", "peek", "[" * 200_000))
    assert result.error.code == "arguments_too_deep" and result.error.message == TOO_DEEP


def test_a_number_no_parser_accepts_is_named_with_the_parsers_words_cut(project):
    import json

    text = '{"path": "app.py", "n": 1' + "0" * 5000 + "}"
    with pytest.raises(ValueError) as parser:
        json.loads(text)
    words = str(parser.value)
    assert len(words) > 120
    result = executor(project, *boundary_fixtures.TOOLS).execute_sync(ToolCall("c1", "peek", text))
    assert result.error.code == "invalid_json"
    assert result.error.message == f"arguments are JSON no tool accepts: {words[:120]}"


def test_arguments_that_are_not_json_values_are_named_with_the_encoders_words_cut(project):
    unusual = type("AHostObjectWhoseTypeNameIsLongEnoughToPushTheEncodersMessagePastTheCutOfOneHundredAndTwentyCharacters", (), {})
    result = executor(project, *boundary_fixtures.TOOLS).execute_sync(ToolCall("c1", "peek", {"path": unusual()}))
    words = f"Object of type {unusual.__name__} is not JSON serializable"
    assert result.error.code == "invalid_argument"
    assert result.error.message == f"arguments are not JSON values: {words[:120]}"


@pytest.mark.parametrize(
    "arguments, where, what",
    [
        ({"path": "app.py\x00"}, "arguments.path", "a NUL character"),
        ({"pa\x00th": "app.py"}, "arguments", "a NUL character"),
        ({"path": "app.py", "tags": ["ok", "b\x00d"]}, "arguments.tags", "a NUL character"),
        ({"path": "app.py", "opts": {"deep": {"deeper": "\x00"}}}, "arguments.opts", "a NUL character"),
        ({"path": "app.py", "opts": {"k\x00": 1}}, "arguments.opts", "a NUL character"),
        ({"path": "app.py\ud800"}, "arguments.path", "a lone surrogate (not valid Unicode text)"),
        ('{"path": "app\\ud800.py"}', "arguments.path", "a lone surrogate (not valid Unicode text)"),
        ({"path": "app.py", "tags": ["\udfff"]}, "arguments.tags", "a lone surrogate (not valid Unicode text)"),
    ],
)
def test_text_no_tool_can_use_is_refused_naming_where_it_is(project, arguments, where, what):
    approver_asked = []
    ex = executor(project, *boundary_fixtures.TOOLS, approver=lambda r: approver_asked.append(r) or True)
    before = (project / "app.py").read_bytes()
    result = ex.execute_sync(ToolCall("c1", "peek", arguments))
    assert result.error.code == "invalid_argument"
    assert result.error.message == f"{where} contains {what}"
    assert approver_asked == [] and (project / "app.py").read_bytes() == before


# -- a known secret of the run, anywhere in the arguments --------------------------------------

SECRET = "sk-live-Qw3rTy7uIo9pAs1dFg"


def secret_refusal(name: str) -> str:
    return (
        f"the arguments of {name!r} contain a credential of this run (whole, 12+ characters of it, or an encoding of it); "
        "nothing was checked, shown for approval or run. Never write a credential into the app: "
        "read it from the environment at run time (os.environ)"
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {"path": "app.py", "content": f"KEY = '{SECRET}'\n"},  # a value
        {"path": "app.py", "content": "x", "tags": ["a", SECRET[3:17]]},  # a piece, in a list
        {"path": "app.py", "content": "x", SECRET: "as a key"},  # a key
        '{"path": "app.py", "content": "' + "".join(f"\\u{ord(c):04x}" for c in SECRET) + '"}',  # \u-escaped
        '{"path": "app.py", "content": ' + SECRET + "}",  # in text that is not even JSON: refused as a secret first
    ],
)
def test_a_known_secret_anywhere_is_refused_before_anything_is_asked_or_written(project, arguments):
    asked = []
    ex = Executor(
        ToolCatalog(boundary_fixtures.TOOLS), ToolContext(services={"workspace": Workspace(project)}),
        policy=EDIT, approver=lambda r: asked.append(r) or True, known_secrets=[SECRET],
    )
    before = (project / "app.py").read_bytes()
    result = ex.execute_sync(ToolCall("c1", "put", arguments))
    assert result.error.code == "secret_in_arguments" and result.error.message == secret_refusal("put")
    assert SECRET[3:15] not in result.observation
    assert asked == [] and (project / "app.py").read_bytes() == before


def test_a_numeric_secret_is_found_in_a_number_and_other_values_pass(project):
    numeric = "738261940517"
    seen: list = []

    class Numbers(ToolArgs):
        n: int = 0
        flag: bool = False
        note: str | None = None

    spec = ToolSpec("num", Category.READ, Numbers, "x", lambda a, c: seen.append(a) or ToolOutcome("ran"))
    ex = Executor(ToolCatalog([spec]), ToolContext(), policy=EDIT, known_secrets=[numeric])
    refused = ex.execute_sync(ToolCall("c1", "num", {"n": int(numeric)}))
    assert refused.error.code == "secret_in_arguments" and refused.error.message == secret_refusal("num")
    fine = ex.execute_sync(ToolCall("c2", "num", {"n": 7, "flag": True, "note": None}))
    assert fine.ok and len(seen) == 1
