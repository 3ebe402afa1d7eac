"""Writing a command's complete captured output into the run workspace, through the fence.

The folder (``.besser_command_output``) lives in the workspace so the agent can search and
read it with the ordinary file tools, which may not change it (``workspace/internal.py``);
listings start outside it, and archives, manifests and snapshots skip it. The host's write
goes through ``publish`` (no-follow walk, atomic rename), because a command may have planted a
link where the folder should be. Each stream is bounded (2 MB), so a runaway command cannot
fill the disk through this path.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kernel_ext.errors import ToolFailure
from kernel_ext.sandbox.capture import StreamResult
from kernel_ext.sandbox.record import CommandRecord
from kernel_ext.workspace import COMMAND_OUTPUT_DIR, Workspace, publish

SPILL_STREAM_BYTES = 2 * 1024 * 1024


def spill(workspace_root: str | Path, record_id: str, command: str, streams: dict[str, StreamResult]) -> str:
    """Write the streams to ``.besser_command_output/<id>.log``; returns the workspace-relative path.

    Raises ``ToolFailure`` when the fence refuses (a link in the way, a full disk).
    """
    parts = [f"$ {command}\n"]
    for name, stream in streams.items():
        body = _bounded(stream.text.encode("utf-8", "replace"))
        parts.append(f"\n===== {name}: {stream.total_bytes} bytes, {stream.lines} lines =====\n")
        parts.append(body.decode("utf-8", "replace"))
    relative = f"{COMMAND_OUTPUT_DIR}/{record_id}.log"
    try:
        publish(Workspace(workspace_root, protected=()), relative, "".join(parts).encode("utf-8"))
    except OSError as exc:
        raise ToolFailure("execution_failed", f"could not write the full output: {exc.strerror}") from None
    return relative


def _bounded(data: bytes) -> bytes:
    if len(data) <= SPILL_STREAM_BYTES:
        return data
    half = SPILL_STREAM_BYTES // 2
    return data[:half] + f"\n[... {len(data) - 2 * half} bytes dropped ...]\n".encode() + data[-half:]


def attach_spill(record: CommandRecord, workspace_root: str | Path) -> CommandRecord:
    """The record, with its output spilled and ``full_output_path`` set when the model's view is cut."""
    if not record.cut():
        return record
    try:
        path = spill(workspace_root, record.id, record.command, {"stdout": record.stdout, "stderr": record.stderr})
    except ToolFailure as exc:
        return replace(record, notes=(*record.notes, f"the full output could not be saved ({exc.message})"))
    note = f"output was cut for this view; the complete captured output is in {path}"
    return replace(record, full_output_path=path, notes=(*record.notes, note))
