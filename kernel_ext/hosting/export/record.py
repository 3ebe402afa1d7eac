"""A finished run read back for export: its events, recipe, request and recorded provider turns.

Only what the run stored is read (``events.jsonl``, ``run.json``, ``.besser/request.json``,
``.besser/model.py``, ``.besser/turns.cassette.jsonl``), each as it was written, redacted then; nothing is
recomputed from the app folder. Refusals are named (``ExportRefused``): a folder that holds
no run, a run still going, a run that never got as far as a model.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_ext.hosting.events import BaseEvent, DoneEvent, RunStarted
from kernel_ext.hosting.layout import RunLayout, run_folder
from kernel_ext.hosting.stored import read_log
from kernel_ext.safetext import shown_line

MAX_SIDE_FILE_BYTES = 64 * 1024 * 1024  # run.json, request.json, the cassette: each one read whole


class ExportRefused(Exception):
    """An export that cannot be made; ``code`` is stable (``RUN_NOT_FOUND``, ``RUN_NOT_FINISHED``,
    ``INVALID_RUN_ID``, ``NOT_EXPORTABLE``, ``CODE_NOT_BUILT``, ``INVALID_PATH``, ``EXPORT_EXISTS``,
    ``EXPORT_UNWRITABLE``), ``message`` one line."""

    def __init__(self, code: str, message: str):
        message = shown_line(message)  # it names paths a person typed: no escape, separator or newline obeyed
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class RunRecord:
    """What an export shows and replays, as the run stored it."""

    run_id: str
    events: list[BaseEvent]
    recipe: dict[str, Any]
    request: dict[str, Any] = field(default_factory=dict)  # empty: a run from before requests were kept
    turns: str | None = None  # the cassette's text; None: the run's turns were not recorded
    model_code: str | None = None  # the model as B-UML Python, as the run kept it (checked before use)

    @property
    def started(self) -> RunStarted | None:
        return next((e for e in self.events if isinstance(e, RunStarted)), None)

    @property
    def done(self) -> DoneEvent:
        last = self.events[-1]
        assert isinstance(last, DoneEvent)  # read_run refuses a log that does not end with done
        return last

    def of_type(self, *types: str) -> list[Any]:
        return [e for e in self.events if e.type in types]


def read_run(run_dir: str | Path) -> RunRecord:
    """The finished run in ``run_dir`` (``ExportRefused`` when it is none, or not finished)."""
    layout = RunLayout(Path(run_dir))
    if run_folder(layout.run_dir.parent, layout.run_id) is None:  # the run store's own rule: an id, no link, a log
        raise ExportRefused("RUN_NOT_FOUND", f"{str(run_dir)[:200]!r} holds no run (a run folder is named by its id "
                            "and holds events.jsonl)")
    events = list(read_log(layout.run_id, layout.events_path))
    if not events or not isinstance(events[-1], DoneEvent):
        raise ExportRefused("RUN_NOT_FINISHED", f"run {layout.run_id} has not finished; export it once it is done")
    recipe = _json_file(layout.recipe_path)
    if not recipe or not isinstance(recipe.get("model"), dict) or "form" not in recipe["model"]:
        status = events[-1].status
        raise ExportRefused("NOT_EXPORTABLE", f"run {layout.run_id} ended {status} before it recorded a model (no run.json)")
    return RunRecord(layout.run_id, events, recipe, _json_file(layout.request_path), _text_file(layout.turns_path),
                     _text_file(layout.model_code_path))


def _text_file(path: Path) -> str | None:
    """The file's text; None when it is absent, a link or not a regular file (never followed nor waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = handle.read(MAX_SIDE_FILE_BYTES + 1)
    if len(data) > MAX_SIDE_FILE_BYTES:
        raise ExportRefused("NOT_EXPORTABLE", f"{path.name} is over {MAX_SIDE_FILE_BYTES // 2**20} MiB")
    return data.decode("utf-8", errors="replace")


def _json_file(path: Path) -> dict[str, Any]:
    from kernel_ext import safejson

    text = _text_file(path)
    if text is None:
        return {}
    try:
        value = safejson.loads(text)
    except ValueError:
        raise ExportRefused("NOT_EXPORTABLE", f"{path.name} is not readable JSON") from None
    return value if isinstance(value, dict) else {}


def decisions(record: RunRecord) -> dict[str, bool]:
    """Each decided call's outcome by host call id (the last decision of a call counts)."""
    return {e.call_id: bool(e.approved) for e in record.of_type("approval_resolved")}


def dumps(value: Any) -> str:
    """JSON for a reader: indented, non-ASCII kept."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
