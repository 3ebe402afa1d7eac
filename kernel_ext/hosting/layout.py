"""Where a run keeps its things: ``<runs>/<run-id>/`` with the app, events and recipe.

``app/`` is the workspace (the generated project, the only tree tools may touch);
``events.jsonl`` and ``run.json`` sit beside it; ``.besser/`` holds what the run needs but the
project must not see (the sandbox's ``$HOME``, snapshots, state, the request it was started
with and its provider turns as a cassette: what an export needs to re-run it).
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from kernel_ext.workspace.internal import RUN_STATE_DIR

RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{2,63}")  # always fullmatch: "$" lets a trailing newline in


class InvalidRunId(ValueError):
    """A name a person typed that cannot be a run id (``../x``, an absolute path, an empty name)."""

    code = "INVALID_RUN_ID"


def check_run_id(run_id: object) -> str:
    """``run_id`` when it is shaped like a run id (``InvalidRunId`` otherwise): checked before a
    typed name reaches a path or a URL, where ``..`` or ``/`` would lead elsewhere."""
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise InvalidRunId(f"{str(run_id)[:80]!r} is not a run id (3 to 64 letters, digits, '-' or '_'; "
                           "`%besser runs` lists them)")
    return run_id


def run_folder(runs_dir: Path, run_id: str) -> Path | None:
    """The folder of run ``run_id`` in the run store ``runs_dir``; None unless the id is one and names
    a real folder (never a link) holding its log (a regular file, never a link)."""
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        return None
    run_dir = Path(runs_dir) / run_id
    events = run_dir / "events.jsonl"
    if run_dir.is_symlink() or not run_dir.is_dir() or events.is_symlink() or not events.is_file():
        return None
    return run_dir


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


@dataclass(frozen=True)
class RunLayout:
    run_dir: Path

    @classmethod
    def create(cls, runs_dir: Path, run_id: str | None = None) -> RunLayout:
        run_id = run_id or new_run_id()
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise ValueError(f"invalid run id {run_id!r}")
        layout = cls(Path(runs_dir) / run_id)
        for folder in (layout.app_dir, layout.home_dir, layout.snapshots_dir):
            folder.mkdir(parents=True, exist_ok=True)
        return layout

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @property
    def app_dir(self) -> Path:
        return self.run_dir / "app"

    @property
    def events_path(self) -> Path:
        return self.run_dir / "events.jsonl"

    @property
    def recipe_path(self) -> Path:
        return self.run_dir / "run.json"

    @property
    def internal_dir(self) -> Path:
        return self.run_dir / RUN_STATE_DIR

    @property
    def home_dir(self) -> Path:
        return self.internal_dir / "home"

    @property
    def snapshots_dir(self) -> Path:
        return self.internal_dir / "snapshots"

    @property
    def request_path(self) -> Path:
        """The request the run was started with (budgets and switches; no model, no key)."""
        return self.internal_dir / "request.json"

    @property
    def model_code_path(self) -> Path:
        """The run's model as B-UML Python, in its elements' creation order (checked when exported)."""
        return self.internal_dir / "model.py"

    @property
    def turns_path(self) -> Path:
        """The run's provider turns, recorded as a cassette the replay provider reads."""
        return self.internal_dir / "turns.cassette.jsonl"
