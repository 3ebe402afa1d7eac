"""A command that finds no free session slot: the same confinement, fresh, in a one-off sandbox.

The directory and exported variables are carried in and saved back through the session's
control folder, so the next command (in the session or another overflow) starts where this one
stopped; background processes it starts end when it returns, and the result says so.
"""

from __future__ import annotations

from pathlib import Path

from kernel_ext.sandbox.oneoff import execute
from kernel_ext.sandbox.record import CommandRecord
from kernel_ext.sandbox.session.protocol import oneoff_script, unlink_quietly
from kernel_ext.sandbox.spec import Confinement
from kernel_ext.sandbox.tiers import TierChoice

OVERFLOW_NOTE = ("the server's live-session limit is reached: this command ran in a one-off sandbox (directory and "
                 "environment carried over; its background processes stopped when it returned)")


def run_overflow(choice: TierChoice, conf: Confinement, ctl: Path, n: int, command: str, start: Path, timeout: float,
                 preserve: bool, notes: list[str]) -> tuple[CommandRecord, Path | None]:
    """Run ``command`` (the session's ``n``-th) from ``start``; returns its record and the folder it ended in
    (None when it was not saved, or ``preserve`` kept the session's)."""
    cmd = ctl / f"{n}.cmd"
    cmd.write_text(command + "\n", encoding="utf-8")
    try:
        record = execute(choice, conf, ["bash", "--noprofile", "--norc", "-c", oneoff_script(ctl, start, cmd, preserve)],
                         timeout, label=command, notes=[*notes, OVERFLOW_NOTE])
    finally:
        unlink_quietly(cmd)
    saved = ctl / "cwd"
    if preserve or not saved.exists():
        return record, None
    return record, Path(saved.read_text(encoding="utf-8", errors="replace"))
