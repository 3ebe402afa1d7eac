"""A base run's folder swapped for a link between reading its run.json and copying its app is refused.

Red team 2 (F7): ``find_base_run`` reads ``<runs>/<id>/run.json`` no-follow from the runs folder,
but ``copy_app`` opened ``<runs>/<id>/app`` by path, following a link at ``<id>``: a swap between
the two steps copied another folder's files into the new run. The swap is made between the two
calls (the order a racing writer would need), on real folders; the refusal leaves nothing copied
and the link's target untouched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.pipeline.modify import copy_app, find_base_run


def _run(folder: Path, marker: str) -> None:
    (folder / "app").mkdir(parents=True)
    (folder / "app" / "main.py").write_text(f"# {marker}\n")
    (folder / "run.json").write_text(json.dumps({"request": marker}))


def test_a_base_run_copies_its_own_app(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _run(runs / "base-run", "base")
    base = find_base_run(runs, "base-run")
    assert copy_app(base, tmp_path / "new" / "app") == 1
    assert (tmp_path / "new" / "app" / "main.py").read_text() == "# base\n"


def test_a_run_folder_swapped_for_a_link_is_refused(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _run(runs / "base-run", "base")
    _run(tmp_path / "elsewhere", "planted")
    base = find_base_run(runs, "base-run")  # the check: run.json read no-follow
    os.rename(runs / "base-run", tmp_path / "moved-away")
    os.symlink(tmp_path / "elsewhere", runs / "base-run")  # the swap, after the check
    with pytest.raises(ToolFailure) as refused:
        copy_app(base, tmp_path / "new" / "app")
    assert refused.value.code == ErrorCode.NOT_FOUND
    assert not (tmp_path / "new" / "app" / "main.py").exists()
    assert (tmp_path / "elsewhere" / "app" / "main.py").read_text() == "# planted\n"
