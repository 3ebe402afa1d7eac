"""What one command did, for the model (bounded text) and for the host (structured data).

``ok`` is earned: true only for exit code 0, never for a timeout or a killed tree. The model
sees each stream's head and tail with counts; whenever that view (or the capture itself)
left something out, the full captured output was spilled to the workspace and the record
carries ``full_output_path`` so the agent can search it.
"""

from __future__ import annotations

import itertools
import secrets
import signal
import time
from dataclasses import dataclass, field

from kernel_ext.safetext import plural
from kernel_ext.sandbox.capture import StreamResult

VIEW_CHARS = 6000  # per stream, for the model
_counter = itertools.count(1)


def new_record_id() -> str:
    """Unique across restarts, sortable by time: ``cmd-20261129-204501-00042a3f9``."""
    return f"cmd-{time.strftime('%Y%m%d-%H%M%S')}-{next(_counter):05d}{secrets.token_hex(2)}"


@dataclass(frozen=True)
class CommandRecord:
    id: str
    command: str
    tier: str
    network: bool
    cwd: str
    exit_code: int | None
    timed_out: bool
    output_capped: bool
    duration_ms: float
    stdout: StreamResult
    stderr: StreamResult
    timeout_s: float = 0.0
    full_output_path: str | None = None
    notes: tuple[str, ...] = ()
    limits: tuple[str, ...] = ()
    secrets_removed: int = 0
    started_at: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)  # added to ``as_data`` (which session ran it)
    stopped_by: str | None = None  # a named limit that stopped the command (``memory_limit``); its note says more

    @property
    def ok(self) -> bool:
        """Earned success: the command exited 0 (not a timeout, not a killed tree)."""
        return self.exit_code == 0 and not self.timed_out and not self.output_capped

    @property
    def signal(self) -> int | None:
        return -self.exit_code if self.exit_code is not None and self.exit_code < 0 else None

    def status_line(self) -> str:
        if self.timed_out:
            state = f"TIMED OUT after {self.timeout_s:g} s (process group killed)"
        elif self.output_capped:
            state = "KILLED: output passed the capture cap"
        elif self.signal is not None:
            state = f"killed by signal {_signal_name(self.signal)}"
        elif self.exit_code == 0:
            state = "exit 0 (success)"
        else:
            state = f"exit {self.exit_code} (failure)"
        if self.stopped_by:
            state += f", at the sandbox's {self.stopped_by.replace('_', ' ')}"
        mode = self.extra.get("network_mode")  # private / host / off where the sandbox said which
        net = f"network {mode}" if mode else "network on" if self.network else "network off"
        return f"{state} · {self.duration_ms:.0f} ms · sandbox {self.tier} ({net}) · cwd {self.cwd}"

    def view(self, which: str, limit: int = VIEW_CHARS) -> tuple[str, bool]:
        """A stream as the model sees it, and whether that view left anything out."""
        stream: StreamResult = getattr(self, which)
        text = stream.text
        if len(text) <= limit and stream.complete:
            return text, False
        if len(text) <= limit:
            return text, True
        head = limit * 2 // 5
        tail = limit - head
        omitted = text[head : len(text) - tail]
        marker = (
            f"\n[... {omitted.count(chr(10))} lines / {len(omitted)} characters not shown; "
            f"{which} has {plural(stream.lines, 'line')}, {plural(stream.total_bytes, 'byte')} ...]\n"
        )
        return text[:head] + marker + text[-tail:], True

    def cut(self) -> bool:
        return any(self.view(name)[1] for name in ("stdout", "stderr"))

    def observation(self) -> str:
        parts = [f"$ {self.command}", self.status_line()]
        for name in ("stdout", "stderr"):
            stream: StreamResult = getattr(self, name)
            if stream.total_bytes == 0:
                continue
            text, _ = self.view(name)
            parts.append(f"[{name}: {plural(stream.lines, 'line')}, {plural(stream.total_bytes, 'byte')}]\n{text.rstrip()}")
        if self.stdout.total_bytes == 0 and self.stderr.total_bytes == 0:
            parts.append("(no output)")
        if self.full_output_path:
            parts.append(f"full output: {self.full_output_path} (search or read it for the omitted part, or sh_detail {self.id})")
        parts.extend(f"note: {note}" for note in self.notes)
        parts.extend(f"sandbox limit: {limit}" for limit in self.limits)
        return "\n".join(parts)

    def as_data(self) -> dict[str, object]:
        """JSON-ready fields for the UI, events and stored records (bounded texts)."""
        data: dict[str, object] = {
            "id": self.id,
            "command": self.command,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "output_capped": self.output_capped,
            "duration_ms": round(self.duration_ms, 2),
            "tier": self.tier,
            "network": self.network,
            "cwd": self.cwd,
            "stdout": self.view("stdout")[0],
            "stderr": self.view("stderr")[0],
            "stdout_bytes": self.stdout.total_bytes,
            "stderr_bytes": self.stderr.total_bytes,
            "stdout_lines": self.stdout.lines,
            "stderr_lines": self.stderr.lines,
            "full_output_path": self.full_output_path,
            "notes": list(self.notes),
            "sandbox_limits": list(self.limits),
            "secrets_env_scrubbed": self.secrets_removed,
        }
        if self.stopped_by:
            data["stopped_by"] = self.stopped_by
        data.update(self.extra)
        return data


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
