# ruff: noqa: F811 - the h fixture imported from shell_tools_fixtures is requested by name
"""sh_detail and stored records: selectors, matches with line numbers, paging, restarts, no_store, bad ids."""

from __future__ import annotations

import pytest
from shell_tools_fixtures import files_under, h, needs_bwrap  # noqa: F401 - h is a fixture

from kernel_ext.errors import ToolFailure
from kernel_ext.sandbox.shtools.shell import Shell

pytestmark = needs_bwrap


def test_detail_returns_streams_matches_and_meta_without_rerunning(h):
    run = h.call("sh_run", command="for i in $(seq 1 300); do echo line $i; done; echo 'WARN late' >&2; echo ran >> count.txt")
    record = run.data["id"]
    whole = h.call("sh_detail", id=record, selector="stdout", max_lines=2000)
    assert whole.ok and whole.data["total_lines"] == 300 and whole.data["text"].splitlines()[-1] == "line 300"
    matched = h.call("sh_detail", id=record, selector="stdout", match=r"line 2\d\d$")
    assert matched.data["matches"] == 100 and matched.data["lines"][0] == "200: line 200"
    page = h.call("sh_detail", id=record, selector="stdout", start_line=101, max_lines=50)
    assert page.data["text"].splitlines()[0] == "line 101" and page.data["next_line"] == 151
    assert h.call("sh_detail", id=record, selector="stderr").data["text"] == "WARN late"
    meta = h.call("sh_detail", id=record, selector="meta").data["meta"]
    assert meta["command"].startswith("for i in") and meta["stdout_bytes"] > 2000 and meta["exit"] == 0
    assert (h.ws / "count.txt").read_text() == "ran\n"  # reading the record never ran the command again


def test_records_survive_recreating_the_store(h, tmp_path):
    record = h.call("sh_run", command="echo persisted; exit 4").data["id"]
    h.service.close()
    fresh = Shell(h.ws, enable=True, policy="bwrap", state_dir=h.state)  # a new server process would do the same
    try:
        assert fresh.detail(record, "stdout")["text"] == "persisted"
        assert fresh.detail(record, "meta")["meta"]["exit"] == 4
        assert fresh.logs(record)["stdout"] == "persisted"
        assert fresh.kill(record)["status"] == "already_exited"
    finally:
        fresh.close()
    elsewhere = Shell(tmp_path / "runs" / "r2" / "app", enable=True, policy="bwrap", state_dir=h.state)
    with pytest.raises(ToolFailure) as other_project:
        elsewhere.detail(record, "stdout")
    assert other_project.value.code == "unknown_command_id"
    elsewhere.close()


def test_no_store_leaves_nothing_on_disk(h):
    before_state = files_under(h.state)
    before_tree = h.tree()
    result = h.call("sh_run", command="echo card-number-4111", no_store=True)
    assert result.ok and result.data["stored"] == "memory-only"
    assert files_under(h.state) == before_state and h.tree() == before_tree
    assert "card-number-4111" in h.call("sh_detail", id=result.data["id"]).data["text"]  # this session only
    background = h.call("sh_run", command="echo bg-secret; sleep 30", background=True, no_store=True)
    assert background.data["stored"] == "memory-only"
    h.call("sh_kill", id=background.data["id"])
    assert files_under(h.state) == before_state
    h.service.close()
    fresh = Shell(h.ws, enable=True, policy="bwrap", state_dir=h.state)
    with pytest.raises(ToolFailure) as gone:
        fresh.detail(result.data["id"])
    assert gone.value.code == "unknown_command_id"
    fresh.close()


def test_bad_ids_selectors_and_cursors_get_named_errors(h):
    record = h.call("sh_run", command="echo one").data["id"]
    assert h.call("sh_detail", id="cmd-20990101-000000-00001abcd").error.code == "unknown_command_id"
    assert h.call("sh_detail", id="../../etc/passwd").error.code == "unknown_command_id"
    assert h.call("sh_detail", id=record, selector="environ").error.code == "invalid_argument"
    assert h.call("sh_detail", id=record, selector="trace").error.code == "not_found"
    assert h.call("sh_detail", id=record, match="(").error.code == "invalid_argument"
    assert h.call("sh_detail", id=record, start_line=50).error.code == "cursor_out_of_range"
    assert h.call("sh_logs", id=record, stdout_cursor=999).error.code == "cursor_out_of_range"
    assert h.call("sh_logs", id=record, stdout_cursor=-1).error.code == "cursor_out_of_range"
    assert h.call("sh_logs", id="nope").error.code == "unknown_command_id"
    assert h.call("sh_kill", id="cmd-20990101-000000-00001abcd").error.code == "unknown_command_id"
    assert h.call("sh_kill", id=record, signal="SIGNOPE").error.code == "invalid_argument"
