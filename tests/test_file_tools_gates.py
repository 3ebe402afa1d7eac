"""The edit gates on their own: the incremental syntax check agrees with a full compile, gutters, elisions."""

from __future__ import annotations

import random

import pytest

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.tools import pysyntax
from kernel_ext.tools.edit_gates import elision_lines, refuse_new_elisions, strip_gutter
from kernel_ext.tools.files_common import split_lines
from kernel_ext.workspace import sha256_hex

MODULE = '''"""Module docstring."""
from __future__ import annotations

import os


@decorator
class Shop:
    """A class."""

    def __init__(self, name):
        self.name = name

    def price(self, base):
        if base > 10:
            return base * 2
        else:
            return base


def helper(x):
    try:
        return int(x)
    except ValueError:
        return 0


VALUES = [
    1,
    2,
]
x = 1; y = 2
async def fetch():
    await thing()
'''

SNIPPETS = [
    "    x = 1\n", "def f():\n    return 2\n", "    )\n", "(\n", "class A:\n", "        pass\n", '"""\n',
    "else:\n    pass\n", "@dec\n", "x = [\n", "]\n", "    def m(self):\n        return 1\n", "\n", "# c\n",
    "return 5\n", "global q\n", "    global q\n", "if True:\n    y = 2\n", "\\\n", "try:\n    pass\n",
    "except E:\n    pass\n", "async def g():\n    await x\n", "await x\n", "    yield 1\n", "from __future__ import braces\n",
]  # fmt: skip


def _valid(text: str) -> bool:
    return not pysyntax.compiles(text, "m.py")


def test_incremental_gate_agrees_with_a_full_compile():
    rnd = random.Random(20261129)
    lines = split_lines(MODULE)
    checked = 0
    for _ in range(600):
        first = rnd.randint(1, len(lines))
        last = rnd.randint(first - 1 if rnd.random() < 0.2 else first, min(len(lines), first + rnd.randint(0, 5)))
        segment = split_lines("".join(rnd.choice(SNIPPETS) for _ in range(rnd.randint(0, 3))))
        if rnd.random() < 0.3:
            segment = lines[first - 1 : last] + segment
        new = lines[: first - 1] + segment + lines[last:]
        old_text, new_text = "".join(lines), "".join(new)
        verdict = pysyntax.regression(
            lines, new, "m.py",
            old_sha=sha256_hex(old_text.encode()), new_sha=sha256_hex(new_text.encode()), edit=(first, last, len(segment)),
        )  # fmt: skip
        expected_refusal = _valid(old_text) and not _valid(new_text)
        assert bool(verdict) == expected_refusal, (first, last, segment)
        checked += 1
        if _valid(new_text):
            lines = new or split_lines(MODULE)
    assert checked == 600


def test_statement_starts_follow_edits_without_reparsing():
    lines = split_lines(MODULE)
    old_sha = sha256_hex(MODULE.encode())
    new = lines[:12] + ["        self.name = name.strip()\n"] + lines[13:]
    new_text = "".join(new)
    assert pysyntax.regression(lines, new, "m.py", old_sha=old_sha, new_sha=sha256_hex(new_text.encode()), edit=(13, 13, 1)) == ""
    import ast

    cached = pysyntax._cached(sha256_hex(new_text.encode()))
    assert cached.starts == pysyntax.statement_starts(ast.parse(new_text).body)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("  12| a = 1\n  13| b = 2\n", "a = 1\nb = 2\n"),
        ("  99| x\n 100| y", "x\ny"),
        ("   7| if a:\n   8|\n   9|     pass\n", "if a:\n\n    pass\n"),
        ("plain\ntext\n", "plain\ntext\n"),
    ],
)
def test_uniform_gutters_are_stripped(text, expected):
    assert strip_gutter(text) == expected


@pytest.mark.parametrize("text", ["  12| a = 1\n", "a = 1\n  13| b = 2\n", "  12| a\n  14| b\n"])
def test_partial_or_single_gutters_are_refused(text):
    with pytest.raises(ToolFailure) as info:
        strip_gutter(text)
    assert info.value.code == ErrorCode.NUMBERED_TEXT


def test_elisions_are_new_ones_only():
    assert elision_lines("# ... rest unchanged\n...\n// existing code here\nx = 1  # fine\n# value unchanged\n")
    assert not elision_lines("# TODO: add more checks...\nvalue = Field(...)\ndef f(): ...\n")
    refuse_new_elisions("def f():\n    ...\n", "def f():\n    ...\n    x = 1\n", "m.py")  # the old one stays
    with pytest.raises(ToolFailure) as info:
        refuse_new_elisions("x = 1\n", "x = 2\n# ... rest of the file\n", "m.py")
    assert info.value.code == ErrorCode.ELISION
