"""The export's builders, one promise at a time, on values and records made here (``hosting/export``):
stored text is shown fenced or escaped, never as markup; the runnable cells are the host's templates
with values as literals. The whole exports (a real demo run) are ``test_export*.py``."""

from __future__ import annotations

import pytest

from kernel_ext.hosting.export.text import bullets, cell, fence, inline, new_file_diff


@pytest.mark.parametrize(("text", "ticks"), [
    ("plain", 3), ("a `b` c", 3), ("``two``", 3), ("```\n# heading", 4), ("````", 5), ("x\n`````y", 6),
])
def test_a_fence_is_longer_than_any_run_of_backticks_inside(text, ticks):
    shown = fence(text, "py")
    assert shown == f"{'`' * ticks}py\n{text}\n{'`' * ticks}"
    lines = shown.split("\n")
    closers = [n for n, line in enumerate(lines) if line.startswith("`" * ticks)]
    assert closers == [0, len(lines) - 1]  # no line of the text closes it


def test_a_fence_drops_trailing_newlines_only_and_has_no_language_by_default():
    assert fence("a\n\n") == "```\na\n```"
    assert fence("\na ") == "```\n\na \n```"


def test_a_table_cell_escapes_every_markup_character():
    assert cell("a|b\nc\\d`e<f*g_h[i") == "a\\|b c\\\\d\\`e&lt;f\\*g\\_h\\[i"
    assert cell(3) == "3"
    assert cell("\\|") == "\\\\\\|"  # the backslash first: an escape of the text's own stays text


@pytest.mark.parametrize(("text", "shown"), [
    ("a/b.py", "`a/b.py`"),
    ("a`b", "``a`b``"),
    ("x``y", "```x``y```"),
    ("`edge", "`` `edge ``"),
    ("edge`", "`` edge` ``"),
    ("two\nlines", "`two lines`"),
])
def test_inline_code_has_a_fence_no_backtick_inside_closes(text, shown):
    assert inline(text) == shown


def test_bullets_show_each_name_as_inline_code_or_say_none():
    assert bullets(["a.py", "b`c"]) == "- `a.py`\n- ``b`c``"
    assert bullets([]) == "*none*"
    assert bullets([], empty="nothing") == "*nothing*"


def test_a_new_file_is_a_diff_from_nothing():
    diff = new_file_diff("app/x.py", "one\ntwo\n")
    assert "+one\n+two" in diff and "-" not in diff.replace("--- ", "").split("@@")[-1]
    assert "app/x.py" in diff
