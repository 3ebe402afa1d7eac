"""Scenarios run by ``tiny_disk.run_on_tiny_disk`` inside a private mount namespace.

argv: PACKAGE_PARENT SCENARIO MOUNTPOINT [ARGS...]. ``MOUNTPOINT`` is a fresh, tiny tmpfs.
Each scenario drives the real Executor (and, where named, the real sandboxed shell) and
prints one JSON line with what it observed; the test asserts on it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from pathlib import Path


def _executor(ws: Path, services: dict | None = None):
    from kernel_ext.boundary import (
        ApprovalPolicy,
        ExecutionPolicy,
        Executor,
        always_approve,
    )
    from kernel_ext.tools.base import ToolContext
    from kernel_ext.tools.registry import default_catalog
    from kernel_ext.workspace import Workspace

    return Executor(default_catalog(), ToolContext(services={"workspace": Workspace(ws), **(services or {})}),
                    policy=ExecutionPolicy.allowing(["read", "edit", "shell"]),
                    approvals=ApprovalPolicy.without_approval_for("shell"), approver=always_approve)


def _call(executor, name: str, **arguments) -> dict:
    from kernel_ext.boundary import ToolCall

    result = executor.execute_sync(ToolCall("d1", name, arguments))
    return {"ok": result.ok, "code": result.error.code if result.error else None,
            "message": result.error.message if result.error else "", "data": {k: v for k, v in result.data.items()
                                                                                  if k in ("exit_code", "stderr", "timed_out")}}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def _temps(ws: Path) -> list[str]:
    return sorted(p.name for p in ws.rglob("*") if ".besser-tmp-" in p.name)


def fill_by_command(ws: Path, home: str, policy: str) -> dict:
    """A sandboxed command fills the workspace's disk; the run keeps its footing."""
    from kernel_ext.sandbox.config import ShellSettings
    from kernel_ext.sandbox.session.service import ShellService

    keep = ws / "keep.py"
    keep.write_text("VALUE = 1\n")
    before = _digest(keep)
    shell = ShellService(ws, run_id="fill", enabled=True, home=home, settings=ShellSettings(policy=policy, session_network=False))
    executor = _executor(ws, {"shell": shell})
    out: dict = {"tier": shell.describe()["sandbox_tier"]}
    try:
        out["fill"] = _call(executor, "run_command", command="head -c 64000000 /dev/zero > fill.bin", timeout=60)
        out["alive"] = _call(executor, "run_command", command="echo alive")
        out["write_new"] = _call(executor, "write_file", path="new.py", content="NEW = 1\n" * 2000)
        out["modify_keep"] = _call(executor, "modify_file", path="keep.py", old_text="VALUE = 1", new_text="VALUE = 2\n" * 2000)
        out["keep_intact"] = _digest(keep) == before
        out["temps_left"] = _temps(ws)
        out["cleanup"] = _call(executor, "run_command", command="rm fill.bin")
        out["write_after"] = _call(executor, "write_file", path="new.py", content="NEW = 1\n")
    finally:
        shell.close()
    return out


def fill_during_write(ws: Path, runs: str) -> dict:
    """The disk fills in the middle of a tool's write, and of the event log's."""
    from kernel_ext.boundary import ToolCall

    keep = ws / "keep.py"
    keep.write_text("".join(f"LINE_{i} = {i}\n" for i in range(5000)))
    before = _digest(keep)
    free = os.statvfs(ws).f_bavail * os.statvfs(ws).f_frsize
    (ws / "ballast.bin").write_bytes(b"\0" * max(free - 256 * 1024, 0))  # leave ~256 KB
    executor = _executor(ws)
    out: dict = {}
    big = "'" + "x" * 600_000 + "'\n"  # one long statement, under the 1 MiB the syntax gate parses; past the ~256 KB free
    out["write_big"] = _call(executor, "write_file", path="big.py", content="DATA = " + big)
    out["big_exists"] = (ws / "big.py").exists()
    read = executor.execute_sync(ToolCall("r", "read_file", {"path": "keep.py", "offset": 0, "limit": 5}))
    out["replace_big"] = _call(executor, "replace_file_lines", path="keep.py", read_id=read.data.get("read_id", ""),
                               start_line=1, end_line=1, new_text="LINE_0 = " + big)
    out["modify_big"] = _call(executor, "modify_file", path="keep.py", old_text="LINE_1 = 1\n", new_text="LINE_1 = " + big)
    out["keep_intact"] = _digest(keep) == before
    out["temps_left"] = _temps(ws)
    out["small_write_still_refused_or_ok"] = _call(executor, "write_file", path="small.py", content="S = 1\n")
    out["events"] = asyncio.run(_event_log_on_full_disk(Path(runs)))
    return out


async def _event_log_on_full_disk(runs: Path) -> dict:
    """A hosted run whose events.jsonl lives on the full disk: it must still end visibly."""
    from kernel_ext.hosting.bus import EventLog
    from kernel_ext.hosting.layout import RunLayout
    from kernel_ext.hosting.run import start_run
    from kernel_ext.hosting.manager import RunManager

    layout = RunLayout.create(runs)

    async def body(ctx) -> None:
        for i in range(10_000):
            ctx.events.emit("text", text=f"step {i} " + "x" * 4000)
            await asyncio.sleep(0)

    run = start_run(body, layout)
    done = await asyncio.wait_for(run.wait(), 60)
    in_memory = [e.type for e in run.events.events]
    on_disk = EventLog.load(layout.run_id, layout.events_path).events
    for big in runs.parent.glob("ballast.bin"):
        big.unlink()  # the operator frees space, then the server restarts
    recovered = RunManager(runs).recover()
    after = EventLog.load(layout.run_id, layout.events_path).events
    return {"done": getattr(done, "status", None), "memory_last": in_memory[-1] if in_memory else None,
            "memory_count": len(in_memory), "disk_count": len(on_disk),
            "disk_seqs_in_order": [e.seq for e in on_disk] == list(range(1, len(on_disk) + 1)),
            "recovered": recovered == [layout.run_id], "after_last": (after[-1].type, getattr(after[-1], "status", None)) if after else None}


SCENARIOS = {"fill_by_command": fill_by_command, "fill_during_write": fill_during_write}

if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    result = SCENARIOS[sys.argv[2]](Path(sys.argv[3]), *sys.argv[4:])
    print(json.dumps(result, default=str))
