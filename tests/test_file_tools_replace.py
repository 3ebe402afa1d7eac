"""replace_file_lines: read-id guarded range edits, every refusal with its code and an unchanged disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from file_tool_helpers import Harness

from kernel_ext.errors import ErrorCode
from kernel_ext.tools import files_read
from kernel_ext.tools.evidence import evidence_log
from kernel_ext.tools.read_ids import read_store

SOURCE = '''"""A small module."""


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


class Box:
    def __init__(self, value):
        self.value = value

    def double(self):
        return self.value * 2
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text(SOURCE)
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    return root


def test_replace_lines_edits_exactly_the_range_and_spends_the_id(project):
    h = Harness(project)
    read_id = h.read("calc.py")
    result = h.call("replace_file_lines", path="calc.py", read_id=read_id, start_line=5, end_line=5, new_text="    return b + a")
    assert result.ok, result.observation
    assert (project / "calc.py").read_text() == SOURCE.replace("return a + b", "return b + a")
    assert result.data["changed"] == [[5, 5]] and "   5|     return b + a" in result.observation
    record = evidence_log(h.context.state).records[-1]
    assert (record.tool, record.path, record.changed, record.sha256) == ("replace_file_lines", "calc.py", ((5, 5),), result.data["sha256"])
    h.refused(ErrorCode.READ_ID_SPENT, "replace_file_lines", path="calc.py", read_id=read_id, start_line=9, end_line=9, new_text="    return b - a")
    again = h.read("calc.py")
    assert h.call("replace_file_lines", path="calc.py", read_id=again, start_line=9, end_line=9, new_text="    return b - a").ok


def test_replace_lines_can_grow_shrink_and_delete(project):
    h = Harness(project)
    grow = h.call("replace_file_lines", path="calc.py", read_id=h.read("calc.py"), start_line=4, end_line=5,
                  new_text="def add(a, b):\n    total = a + b\n    return total\n")
    assert grow.ok and grow.data["changed"] == [[4, 6]]
    delete = h.call("replace_file_lines", path="notes.txt", read_id=h.read("notes.txt"), start_line=2, end_line=2, new_text="")
    assert delete.ok and (project / "notes.txt").read_text() == "alpha\ngamma\n"
    assert "total = a + b" in (project / "calc.py").read_text()


def test_uniform_gutter_is_stripped(project):
    h = Harness(project)
    read_id = h.read("calc.py")
    text = "  16|     def double(self):\n  17|         return self.value + self.value\n"
    assert h.call("replace_file_lines", path="calc.py", read_id=read_id, start_line=16, end_line=17, new_text=text).ok
    assert (project / "calc.py").read_text().endswith("    def double(self):\n        return self.value + self.value\n")


def test_refusals_leave_the_disk_unchanged(project):
    h = Harness(project)
    read_id = h.read("calc.py", offset=3, limit=6)  # shows lines 4-9
    common = {"path": "calc.py", "read_id": read_id}
    h.refused(ErrorCode.UNKNOWN_READ_ID, "replace_file_lines", path="calc.py", read_id="r000000-9", start_line=5, end_line=5, new_text="x = 1")
    h.refused(ErrorCode.UNREAD_RANGE, "replace_file_lines", **common, start_line=12, end_line=13, new_text="class Box:\n    pass\n")
    h.refused(ErrorCode.UNREAD_RANGE, "replace_file_lines", **common, start_line=3, end_line=4, new_text="def add(a, b):")
    h.refused(ErrorCode.INVALID_ARGUMENT, "replace_file_lines", **common, start_line=6, end_line=5, new_text="")
    h.refused(ErrorCode.INVALID_ARGUMENT, "replace_file_lines", **common, start_line=0, end_line=5, new_text="")
    h.refused(ErrorCode.NO_CHANGE, "replace_file_lines", **common, start_line=5, end_line=5, new_text="    return a + b")
    h.refused(ErrorCode.ELISION, "replace_file_lines", **common, start_line=4, end_line=5, new_text="def add(a, b):\n    # ... rest unchanged\n")
    h.refused(ErrorCode.ELISION, "replace_file_lines", **common, start_line=5, end_line=5, new_text="    ...")
    h.refused(ErrorCode.SYNTAX_ERROR, "replace_file_lines", **common, start_line=5, end_line=5, new_text="    return (a +")
    h.refused(ErrorCode.NUMBERED_TEXT, "replace_file_lines", **common, start_line=5, end_line=5, new_text="   5|     return a - b")
    h.refused(ErrorCode.NUMBERED_TEXT, "replace_file_lines", **common, start_line=4, end_line=5, new_text="def add(a, b):\n   5|     return 0")
    h.refused(ErrorCode.UNKNOWN_READ_ID, "replace_file_lines", path="notes.txt", read_id=read_id, start_line=1, end_line=1, new_text="z")
    h.refused(ErrorCode.OUTSIDE_WORKSPACE, "replace_file_lines", path="../calc.py", read_id=read_id, start_line=5, end_line=5, new_text="x")


def test_stale_read_id_after_an_outside_change(project):
    h = Harness(project)
    read_id = h.read("calc.py")
    (project / "calc.py").write_text(SOURCE.replace("a - b", "a - b - 0"))
    h.refused(ErrorCode.STALE_INPUT, "replace_file_lines", path="calc.py", read_id=read_id, start_line=5, end_line=5, new_text="    return 0")


def test_a_truncated_line_is_not_editable(project, monkeypatch):
    (project / "wide.py").write_text("x = 1\ny = '" + "z" * 3000 + "'\n")
    h = Harness(project)
    read_id = h.read("wide.py")
    h.refused(ErrorCode.UNREAD_RANGE, "replace_file_lines", path="wide.py", read_id=read_id, start_line=2, end_line=2, new_text="y = 2")
    assert h.call("replace_file_lines", path="wide.py", read_id=read_id, start_line=1, end_line=1, new_text="x = 2").ok


def test_syntax_gate_allows_fixing_a_broken_file_step_by_step(project):
    (project / "broken.py").write_text("def f(:\n    return 1\n\nx = (\n")
    h = Harness(project)
    result = h.call("replace_file_lines", path="broken.py", read_id=h.read("broken.py"), start_line=1, end_line=1, new_text="def f():")
    assert result.ok, result.observation  # still broken (line 4), but no longer worse


def test_ids_expire_when_a_run_resumes(project):
    h = Harness(project)
    read_id = h.read("calc.py")
    read_store(h.context.state).expire()
    h.refused(ErrorCode.UNKNOWN_READ_ID, "replace_file_lines", path="calc.py", read_id=read_id, start_line=5, end_line=5, new_text="    return 0")
    fresh = Harness(project)  # a new run (a restart): the old id means nothing there either
    fresh.refused(ErrorCode.UNKNOWN_READ_ID, "replace_file_lines", path="calc.py", read_id=read_id, start_line=5, end_line=5, new_text="    return 0")


def test_two_rejections_on_a_file_bring_the_recovery_sequence(project):
    h = Harness(project)
    first = h.refused(ErrorCode.NO_MATCH, "modify_file", path="calc.py", old_text="return a * b", new_text="return 0")
    assert "recovery" not in first.data
    second = h.refused(ErrorCode.NO_MATCH, "modify_file", path="calc.py", old_text="return a / b", new_text="return 0")
    assert second.data["recovery"][0].startswith("read_file") and second.data["recovery"][1].startswith("replace_file_lines")
    assert "Recover with" in second.observation
    assert h.call("replace_file_lines", path="calc.py", read_id=h.read("calc.py"), start_line=5, end_line=5, new_text="    return 0").ok
    after = h.refused(ErrorCode.NO_MATCH, "modify_file", path="calc.py", old_text="nothing like it", new_text="x")
    assert "recovery" not in after.data  # a success resets the count


def test_approval_request_carries_snapshot_and_diff(project):
    seen = []

    def approver(request) -> bool:
        seen.append(request)
        return True

    h = Harness(project, approver=approver)
    read_id = h.read("calc.py")
    assert h.call("replace_file_lines", path="calc.py", read_id=read_id, start_line=5, end_line=5, new_text="    return b + a").ok
    request = seen[-1]
    assert [f.path for f in request.files] == ["calc.py"] and request.files[0].exists
    assert "-    return a + b\n+    return b + a\n" in request.proposal and "@@ -2,7 +2,7 @@" in request.proposal


def test_a_change_during_approval_is_stale_and_nothing_is_written(project):
    def approver(request) -> bool:
        (project / "calc.py").write_text(SOURCE + "# changed by a person\n")
        return True

    h = Harness(project, approver=approver)
    read_id = h.read("calc.py")
    result = h.call("replace_file_lines", path="calc.py", read_id=read_id, start_line=5, end_line=5, new_text="    return 0")
    assert not result.ok and result.error.code == ErrorCode.STALE_INPUT
    assert (project / "calc.py").read_text() == SOURCE + "# changed by a person\n"


def test_long_file_windows_edit_within_the_shown_window(project, monkeypatch):
    monkeypatch.setattr(files_read, "READ_LIMIT_LINES", 100)
    (project / "long.py").write_text("".join(f"v{n} = {n}\n" for n in range(1, 2001)))
    h = Harness(project)
    read_id = h.read("long.py", offset=1499)
    h.refused(ErrorCode.UNREAD_RANGE, "replace_file_lines", path="long.py", read_id=read_id, start_line=1400, end_line=1400, new_text="v1400 = 0")
    assert h.call("replace_file_lines", path="long.py", read_id=read_id, start_line=1550, end_line=1550, new_text="v1550 = -1").ok
    assert "v1550 = -1\n" in (project / "long.py").read_text()


def test_crlf_files_keep_their_line_endings(project):
    (project / "win.py").write_bytes(b"a = 1\r\nb = 2\r\n")
    h = Harness(project)
    assert h.call("replace_file_lines", path="win.py", read_id=h.read("win.py"), start_line=2, end_line=2, new_text="b = 3\nc = 4").ok
    assert (project / "win.py").read_bytes() == b"a = 1\r\nb = 3\r\nc = 4\r\n"
