"""A run id is matched whole: ``re.match`` with ``$`` let ``"abc\\n"`` through (``$`` matches before a
final newline), so every use of ``RUN_ID_PATTERN`` is a ``fullmatch``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernel_ext.hosting.layout import InvalidRunId, check_run_id, run_folder

ROOT = Path(__file__).resolve().parents[1] / "kernel_ext"


@pytest.mark.parametrize("run_id", ["abc\n", "abc\r", "run-1\n", "\nabc", "abc\x00", "ab", "../abc", "abc/x"])
def test_a_run_id_with_a_trailing_newline_or_other_junk_is_refused(run_id, tmp_path):
    for real in ("abc", "run-1"):  # the folder the junk name would reach once trimmed
        (tmp_path / real).mkdir()
        (tmp_path / real / "events.jsonl").write_text("")
    with pytest.raises(InvalidRunId):
        check_run_id(run_id)
    assert run_folder(tmp_path, run_id) is None


def test_a_real_run_id_is_still_found(tmp_path):
    (tmp_path / "abc").mkdir()
    (tmp_path / "abc" / "events.jsonl").write_text("")
    assert check_run_id("abc") == "abc"
    assert run_folder(tmp_path, "abc") == tmp_path / "abc"
    assert run_folder(tmp_path, "abc\n") is None  # the same folder, named with a newline: refused


def test_every_use_of_the_run_id_pattern_is_a_fullmatch():
    uses = [(p, m.group(0)) for p in ROOT.rglob("*.py") for m in re.finditer(r"RUN_ID_PATTERN\.\w+\(", p.read_text())]
    assert uses and all(call == "RUN_ID_PATTERN.fullmatch(" for _p, call in uses), uses
