"""The edit gates' words and counts (mutation testing found them unpinned; the tools' use is in test_file_tools_gates).

A numbered-text refusal names the field, the line and its start; placeholder lines are counted
per kind, blank lines and real code between them included; a refusal names at most three.
"""

from __future__ import annotations

from collections import Counter

import pytest

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.tools.edit_gates import elision_lines, refuse_new_elisions, strip_gutter

LONG_LINE = "  12| value = compute(first_argument, second_argument, third)"


def test_a_partial_gutter_is_refused_naming_the_field_the_line_and_its_start():
    with pytest.raises(ToolFailure) as refused:
        strip_gutter(f"x = 1\n{LONG_LINE}\n")
    assert refused.value.code == ErrorCode.NUMBERED_TEXT
    assert refused.value.message == (
        f"new_text line 2 starts with a read_file line number ({LONG_LINE[:40]!r}). The 'NNN| ' gutter is removed "
        "only when every line carries it with consecutive numbers; send the code without line numbers")
    with pytest.raises(ToolFailure) as named:
        strip_gutter("  7| only line", field="content")
    assert named.value.message.startswith("content line 1 starts with a read_file line number ('  7| only line')")


def test_placeholder_lines_are_counted_per_kind_across_blank_lines_and_code():
    lines = ["def f():", "", "    ...", "    ...", "    …", "    # ... rest unchanged", "", "    # ... rest unchanged",
             "    # same ...", "    # rest of the file", "    # ...later", "    # …later", "    #", "    return 1"]
    text = "\n".join(lines)
    assert elision_lines(text) == Counter({
        "...": 2, "…": 1, "# ... rest unchanged": 2, "# same ...": 1, "# rest of the file": 1, "# ...later": 1,
        "# …later": 1})


def test_comments_that_are_not_placeholders_are_not_counted():
    assert elision_lines("#\n# compute the total\n# see ... below for why\nx = 1  # ...\n") == Counter()


def test_a_refusal_names_at_most_three_new_placeholders_and_lists_them_all():
    lines = ["# ... one", "# ... two", "# ... three", "# ... four", "x = 1"]
    new = "\n".join(lines)
    with pytest.raises(ToolFailure) as refused:
        refuse_new_elisions("# ... one\n", new, "m.py")  # "one" was there already
    failure = refused.value
    assert failure.code == ErrorCode.ELISION
    assert failure.message == (
        "the new text for 'm.py' contains placeholder lines ('# ... two', '# ... three', '# ... four') that stand for "
        "code it does not include. Send the complete text; to keep lines unchanged, leave them out of the edited "
        "range. (For an intentional Ellipsis statement write `pass` or `raise NotImplementedError`.)")
    assert failure.data == {"elisions": ["# ... two", "# ... three", "# ... four"]}
    with pytest.raises(ToolFailure) as many:
        refuse_new_elisions("", new, "m.py")
    assert "'# ... three')" in many.value.message and "four" not in many.value.message
    assert len(many.value.data["elisions"]) == 4
