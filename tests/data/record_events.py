"""Re-record the run view's event fixtures from real runs (nothing here is authored by hand).

    PYTHONPATH=. python tests/data/record_events.py library   # notebook 01's run -> library_jwt_run.events.jsonl
    PYTHONPATH=. python tests/data/record_events.py tour      # tools tour -> tools_tour.events.jsonl

``library``: notebook 01's cells up to its ``%besser generate ... --approve edits`` run in an
in-process IPython (the replayed cassette, the real host, Phase 1 and Phase 3 for real, bwrap);
the one card left (test_api) is approved by clicking its Approve button, as a person would.
``tour``: the real Executor, tool catalog, bwrap shell service and EventLog over a scratch
workspace: a new file, an edit, two commands, an sh_run, a call the policy refuses, a denial
and a generator; the approver answers from a fixed list, saying who decided.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def record_library(out: Path) -> None:
    from IPython.testing.globalipapp import start_ipython

    scratch = Path(tempfile.mkdtemp(prefix="record-library-"))
    os.chdir(scratch)
    shell = start_ipython()
    notebook = json.loads((ROOT / "notebooks" / "01-library-prototyping.ipynb").read_text())
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    for source in cells[:5]:  # up to and including the %besser generate cell
        result = shell.run_cell(source)
        if result.error_in_exec is not None:
            raise SystemExit(f"cell failed: {result.error_in_exec}")
    view = shell.user_ns["view"]
    deadline = time.monotonic() + 300
    while not view.state.finished and time.monotonic() < deadline:
        for card in view.cards:
            if not card.decided:
                time.sleep(1.5)  # a person reading the card
                card.approve_button.click()
        time.sleep(0.2)
    shutil.copyfile(Path(view.state.run_dir) / "events.jsonl", out)
    os.chdir(ROOT)  # IPython reads the working folder at exit; the scratch run folder stays in the temp dir


class Answers:
    """A host approver answering from a list: ``y`` a person approves, ``n`` denies, ``a`` the --approve setting."""

    def __init__(self, answers: str):
        self.answers = iter(answers)
        self.decided_by: dict[str, str] = {}

    def __call__(self, request) -> bool:
        answer = next(self.answers)
        self.decided_by[request.call_id] = "auto" if answer == "a" else "card"
        return answer != "n"


async def _tour(out: Path) -> None:
    from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall
    from kernel_ext.hosting.bus import EventLog
    from kernel_ext.model.examples import build_library_model
    from kernel_ext.pipeline.reporting import boundary_observer, report_call, report_result
    from kernel_ext.sandbox import ShellService, ShellSettings
    from kernel_ext.tools.base import ToolContext
    from kernel_ext.tools.registry import default_catalog
    from kernel_ext.workspace import Workspace

    scratch = Path(tempfile.mkdtemp(prefix="record-tour-"))
    os.environ["BESSER_SHELL_STATE_DIR"] = str(scratch / "state")
    project = scratch / "app"
    project.mkdir()
    (project / "catalogue.py").write_text("def count(rows):\n    return len(rows)\n\n\ndef first(rows):\n    return rows[0]\n")
    shell = ShellService(project, enabled=True, settings=ShellSettings.from_environment(dict(os.environ)))
    out.unlink(missing_ok=True)
    log = EventLog("tour-1", out)
    log.emit("run_started", request="tools tour", provider_label="scripted:tour", provider_kind="scripted", run_dir=str(scratch))
    log.emit("phase", phase="customize", status="started")
    approver = Answers("yayyyna")
    services = {"workspace": Workspace(project), "shell": shell, "domain_model": build_library_model()}

    def executor(allowed):
        return Executor(default_catalog(), ToolContext(services=services), policy=ExecutionPolicy.allowing(allowed),
                        approver=approver, observer=boundary_observer(log, approver), run_id="tour-1")

    open_policy, read_only = executor(["edit", "shell", "test", "generate"]), executor([])
    number = 0

    async def call(name: str, runner=open_policy, **arguments) -> None:
        nonlocal number
        number += 1
        tool_call = ToolCall(f"x{number}", name, arguments)
        report_call(log, tool_call)
        report_result(log, await runner.execute(tool_call))

    todo = '"""Things to do."""\nTODO = ["ship"]\n\n\ndef pending():\n    return list(TODO)\n'
    await call("write_file", path="notes/todo.py", content=todo)
    await open_policy.execute(ToolCall("r0", "read_file", {"path": "catalogue.py"}))  # modify_file needs a read first
    await call("modify_file", path="catalogue.py", old_text="    return rows[0]\n", new_text="    return rows[0] if rows else None\n")
    await call("run_command", command="ls -la && python3 -c 'print(40 + 2)'")
    await call("run_command", command="ls no-such-file")
    await call("sh_run", command="rm -f notes/todo.py", cwd=".")
    await call("write_file", runner=read_only, path="catalogue.py", content="x = 1\n")
    await call("modify_file", path="catalogue.py", old_text="def count(rows):\n", new_text="def count(rows: list) -> int:\n")
    await call("generate_pydantic")
    log.emit("phase", phase="customize", status="done")
    log.emit("done", status="completed")
    log.close_file()
    shell.close()
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else ""
    if which == "library":
        record_library(HERE / "library_jwt_run.events.jsonl")
    elif which == "tour":
        asyncio.run(_tour(HERE / "tools_tour.events.jsonl"))
    else:
        raise SystemExit("usage: record_events.py library|tour")
