"""The export's reading of a finished run (``hosting/export/record.py``), one rule at a time, on a
copy of the real demo run changed one file at a time: each refusal is its named code and the
words a person reads, and nothing is written; side files are read as stored, never through a link,
never waited on, whole up to the cap; the JSON shown to a reader is indented, in stored order,
non-ASCII kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from export_fixtures import RUN_ID, demo_run, folder_state, run_copy  # noqa: F401

from kernel_ext.hosting.export import ExportRefused, export_run
from kernel_ext.hosting.export.record import MAX_SIDE_FILE_BYTES, decisions, dumps, read_run
from kernel_ext.hosting.export.sections import decided_calls

TURNS = Path(".besser") / "turns.cassette.jsonl"


def refusal(run_dir: Path, tmp_path: Path) -> ExportRefused:
    """The export's refusal of ``run_dir``: one line, and neither the run nor the target folder changed."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    before = folder_state(run_dir) if run_dir.exists() else None
    with pytest.raises(ExportRefused) as caught:
        export_run(run_dir, out / "x.ipynb", known=())
    assert "\n" not in str(caught.value) and list(out.iterdir()) == []
    assert (folder_state(run_dir) if run_dir.exists() else None) == before
    return caught.value


def test_a_folder_that_holds_no_run_is_named_with_its_path_cut_to_200(tmp_path):
    missing = tmp_path / ("n" * 120) / ("m" * 120) / "no-such-run"
    refused = refusal(missing, tmp_path)
    assert refused.code == "RUN_NOT_FOUND"
    assert refused.message == (f"{str(missing)[:200]!r} holds no run (a run folder is named by its id and holds "
                               "events.jsonl)")
    assert str(refused) == f"RUN_NOT_FOUND: {refused.message}"


def test_a_run_still_going_is_refused_by_name(run_copy, tmp_path):  # noqa: F811
    lines = (run_copy / "events.jsonl").read_text().splitlines()
    (run_copy / "events.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    refused = refusal(run_copy, tmp_path)
    assert (refused.code, refused.message) == ("RUN_NOT_FINISHED",
                                               f"run {RUN_ID} has not finished; export it once it is done")


@pytest.mark.parametrize("recipe", [None, {"generator": "x"}, {"model": "a string"}, {"model": {"name": "Library"}}],
                         ids=["no-run-json", "no-model", "model-not-an-object", "model-without-form"])
def test_a_run_without_a_recorded_model_is_not_exportable_and_says_how_it_ended(recipe, run_copy, tmp_path):  # noqa: F811
    if recipe is None:
        (run_copy / "run.json").unlink()
    else:
        (run_copy / "run.json").write_text(json.dumps(recipe))
    refused = refusal(run_copy, tmp_path)
    assert (refused.code, refused.message) == (
        "NOT_EXPORTABLE", f"run {RUN_ID} ended completed before it recorded a model (no run.json)")


@pytest.mark.parametrize("name", ["run.json", ".besser/request.json"])
def test_a_side_file_that_is_not_json_is_named(name, run_copy, tmp_path):  # noqa: F811
    (run_copy / name).write_text("{not json")
    refused = refusal(run_copy, tmp_path)
    assert (refused.code, refused.message) == ("NOT_EXPORTABLE", f"{Path(name).name} is not readable JSON")


def test_a_request_file_that_is_json_but_not_an_object_reads_as_none_kept(run_copy):  # noqa: F811
    (run_copy / ".besser" / "request.json").write_text("[1, 2]")
    assert read_run(run_copy).request == {}


def test_a_side_file_at_the_cap_is_read_whole_and_one_byte_over_is_refused(run_copy, tmp_path):  # noqa: F811
    turns = run_copy / TURNS
    turns.write_bytes(b"x" * MAX_SIDE_FILE_BYTES)
    assert len(read_run(run_copy).turns) == MAX_SIDE_FILE_BYTES
    with turns.open("ab") as handle:
        handle.write(b"y")
    refused = refusal(run_copy, tmp_path)
    assert (refused.code, refused.message) == ("NOT_EXPORTABLE", "turns.cassette.jsonl is over 64 MiB")


# A child whose address space cannot hold the side file: a reader bounded at the cap refuses it by name, one
# that reads the whole file first dies of MemoryError (the file is sparse: 8 GiB named, nothing stored).
BOUNDED_READ = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))
from kernel_ext.hosting.export.record import ExportRefused, read_run
try:
    read_run(sys.argv[1])
except ExportRefused as exc:
    print(exc.code, exc.message)
"""


def test_a_side_file_of_gigabytes_is_refused_after_reading_no_more_than_the_cap(run_copy):  # noqa: F811
    with (run_copy / TURNS).open("r+b") as handle:
        handle.truncate(8 * 2**30)
    done = subprocess.run([sys.executable, "-c", BOUNDED_READ, str(run_copy)], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "NOT_EXPORTABLE turns.cassette.jsonl is over 64 MiB\n", "")


def test_a_side_file_that_is_a_link_is_not_followed(run_copy, tmp_path):  # noqa: F811
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("print('not the run')\n")
    for name in (TURNS, Path(".besser") / "model.py"):
        (run_copy / name).unlink()
        (run_copy / name).symlink_to(elsewhere)
    record = read_run(run_copy)
    assert record.turns is None and record.model_code is None


@pytest.mark.timeout(60)  # a reader that waits on the pipe hangs here: the deadline makes it a failure
def test_a_side_file_that_is_a_pipe_is_not_waited_on(run_copy):  # noqa: F811
    (run_copy / TURNS).unlink()
    os.mkfifo(run_copy / TURNS)
    assert read_run(run_copy).turns is None


def test_a_byte_that_is_not_utf8_is_read_as_a_replacement_character(run_copy):  # noqa: F811
    model = run_copy / ".besser" / "model.py"
    model.write_bytes(model.read_bytes() + b"# caf\xe9\n")
    assert read_run(run_copy).model_code.endswith("# caf\ufffd\n")


def test_a_done_event_too_large_to_reload_stands_in_for_the_run_it_ended(run_copy):  # noqa: F811
    log = run_copy / "events.jsonl"
    lines = log.read_text().splitlines()
    done = json.loads(lines[-1])
    done["summary"] = "s" * (4 * 1024 * 1024 + 10)
    log.write_text("\n".join([*lines[:-1], json.dumps(done, separators=(",", ":"))]) + "\n")
    record = read_run(run_copy)
    assert (record.done.status, record.done.run_id) == ("completed", RUN_ID)
    assert "over the" in record.done.summary


def test_decisions_are_each_calls_last_outcome(run_copy):  # noqa: F811
    record = read_run(run_copy)
    resolved = [e.call_id for e in record.of_type("approval_resolved")]
    assert resolved and decisions(record) == dict.fromkeys(resolved, True)  # the demo approves all
    last = record.of_type("approval_resolved")[-1]
    denied = last.model_copy(update={"approved": False})
    record.events = [denied if e is last else e for e in record.events]
    assert decisions(record) == {**dict.fromkeys(resolved, True), last.call_id: False}


def test_arguments_a_card_showed_are_json_indented_in_their_order_with_non_ascii_kept(run_copy):  # noqa: F811
    record = read_run(run_copy)
    asked = next(e for e in record.of_type("approval_requested") if e.name == "write_file")
    arguments = {"zeta": "café ☕", "alpha": [1]}
    changed = asked.model_copy(update={"request": {"arguments": arguments}})
    record.events = [changed if e is asked else e for e in record.events]
    shown = next(source for _, source in decided_calls(record) if source.startswith(f"### `{asked.call_id}`"))
    assert '{\n  "zeta": "café ☕",\n  "alpha": [\n    1\n  ]\n}' in shown
    assert dumps(arguments) == '{\n  "zeta": "café ☕",\n  "alpha": [\n    1\n  ]\n}'
