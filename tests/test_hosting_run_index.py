"""``GET runs`` is independent of history (issue 28, item 13): 1,000 finished runs on disk, listed
by a real Jupyter server through the run index; each log is read once per version of the file.

The runs are made fast, as the files the store reads (``events.jsonl`` of a finished run). The
index must heal (a run added after it was built appears, a removed one disappears, a rewritten
log is read again) and trust nothing in a folder: a log that is a link or a FIFO, a folder that
is a link, a name that is no run id are not listed (and a FIFO never hangs the listing).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from jupyter_fixtures import extension_config, jp_asyncio_loop, jp_server_config, runs_dir  # noqa: F401

from kernel_ext.hosting.events import make_event, to_json
from kernel_ext.server.handlers.base import STATE_KEY

N = 1000


def finished_log(run_id: str, status: str = "completed", request: str = "") -> str:
    lines = [make_event("run_started", run_id, request=request or f"app {run_id}", model_name="Library"),
             make_event("phase", run_id, phase="select", status="done"),
             make_event("done", run_id, status=status, summary=f"{status} {run_id}")]
    return "".join(to_json(e.model_copy(update={"seq": i})) + "\n" for i, e in enumerate(lines, 1))


def write_run(runs: Path, run_id: str, **kwargs) -> Path:
    folder = runs / run_id
    folder.mkdir()
    (folder / "events.jsonl").write_text(finished_log(run_id, **kwargs))
    return folder


def run_id(number: int) -> str:
    return f"20240101-000000-{number:06x}"


async def listing(jp_fetch) -> dict[str, dict]:
    answer = json.loads((await jp_fetch("besser-agent", "runs")).body)
    return {run["id"]: run for run in answer["runs"]}


async def test_a_thousand_runs_are_listed_from_the_index_which_heals_and_trusts_no_folder(jp_fetch, jp_serverapp, runs_dir, tmp_path):  # noqa: F811
    for number in range(N):
        write_run(runs_dir, run_id(number), status="completed" if number % 3 else "blocked")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "events.jsonl").write_text(finished_log(run_id(90_001)))
    for number, plant in ((90_001, "log link"), (90_002, "fifo"), (90_003, "folder link"), (90_004, "name")):
        if plant == "log link":
            (runs_dir / run_id(number)).mkdir()
            (runs_dir / run_id(number) / "events.jsonl").symlink_to(outside / "events.jsonl")
        elif plant == "fifo":
            (runs_dir / run_id(number)).mkdir()
            os.mkfifo(runs_dir / run_id(number) / "events.jsonl")
        elif plant == "folder link":
            (runs_dir / run_id(number)).symlink_to(outside)
        else:
            shutil.copytree(outside, runs_dir / "not a run id")
    manager = jp_serverapp.web_app.settings[STATE_KEY].manager

    runs = await listing(jp_fetch)
    assert sorted(runs) == [run_id(n) for n in range(N)]  # none of the planted entries
    assert [runs[run_id(n)]["status"] for n in (0, 1, 2, 3)] == ["blocked", "completed", "completed", "blocked"]
    sample = runs[run_id(7)]
    assert (sample["request"], sample["model_name"], sample["events"], sample["summary"]) == \
        (f"app {run_id(7)}", "Library", 3, f"completed {run_id(7)}")
    assert sample["run_dir"] == str(runs_dir / run_id(7)) and not sample["live"]
    assert manager.index.reads == N

    reads = manager.index.reads
    assert await listing(jp_fetch) == runs
    assert manager.index.reads == reads  # unchanged logs are not read again

    # healed: a run added after the index was built appears, a removed one disappears, a rewritten log is read again
    write_run(runs_dir, run_id(N), request="added later")
    shutil.rmtree(runs_dir / run_id(5))
    (runs_dir / run_id(6) / "events.jsonl").write_text(finished_log(run_id(6), status="failed", request="rewritten"))
    runs = await listing(jp_fetch)
    assert len(runs) == N and run_id(5) not in runs and runs[run_id(N)]["request"] == "added later"
    assert (runs[run_id(6)]["status"], runs[run_id(6)]["request"]) == ("failed", "rewritten")
    assert manager.index.reads == reads + 2

    # a folder whose log was swapped for a link after it was indexed drops out
    (runs_dir / run_id(8) / "events.jsonl").unlink()
    (runs_dir / run_id(8) / "events.jsonl").symlink_to(outside / "events.jsonl")
    assert run_id(8) not in await listing(jp_fetch)
