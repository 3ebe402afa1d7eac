"""What the file tools did this run: successful writes (evidence, receipts) and refusals.

Evidence lives in ``RunState`` under ``"evidence"`` as an ``EvidenceLog``. Each successful
write appends one ``WriteRecord``::

    id          1, 2, ... in order of writes within the run
    tool        "replace_file_lines" | "modify_file" | "write_file" | "delete_file"
    path        the fenced display path
    sha256      digest of the file after the write ("" after a delete)
    before      digest before the write ("" when the file was created)
    changed     1-based inclusive line ranges of the new file that changed; an empty range
                (n, n - 1) marks lines removed before line n
    fingerprint digest of the exact edit arguments (a receipt for ``already_applied``)
    deleted     True for ``delete_file``

A later checklist cites a record by ``id`` and checks it is still current (the file's digest
is still ``sha256``). Refusals are counted per file under ``"edit_rejections"``: after two, a
refusal carries the explicit recovery sequence (``read_file``, then ``replace_file_lines``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from kernel_ext.tools.base import RunState

EVIDENCE_KEY = "evidence"
REJECTIONS_KEY = "edit_rejections"
RECOVERY_AFTER = 2


@dataclass(frozen=True)
class WriteRecord:
    id: int
    tool: str
    path: str
    sha256: str
    before: str
    changed: tuple[tuple[int, int], ...]
    fingerprint: str = ""
    deleted: bool = False

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["changed"] = [list(r) for r in self.changed]
        return data


@dataclass
class EvidenceLog:
    records: list[WriteRecord] = field(default_factory=list)

    def record(self, tool: str, path: str, sha256: str, before: str, changed: tuple[tuple[int, int], ...], *,
               fingerprint: str = "", deleted: bool = False) -> WriteRecord:
        entry = WriteRecord(len(self.records) + 1, tool, path, sha256, before, tuple(changed), fingerprint, deleted)
        self.records.append(entry)
        return entry

    def for_path(self, path: str) -> list[WriteRecord]:
        return [r for r in self.records if r.path == path]

    def receipt(self, path: str, fingerprint: str) -> WriteRecord | None:
        """The latest successful write of ``path`` made by exactly this edit, if any."""
        for entry in reversed(self.records):
            if entry.path == path and entry.fingerprint == fingerprint:
                return entry
        return None


def fingerprint(tool: str, **arguments: Any) -> str:
    """A stable digest of one edit's arguments: the identity of "this exact edit"."""
    text = json.dumps({"tool": tool, **arguments}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def evidence_log(state: RunState) -> EvidenceLog:
    return state.store(EVIDENCE_KEY, EvidenceLog)


def rejections(state: RunState) -> Counter:
    return state.store(REJECTIONS_KEY, Counter)


def recovery_steps(path: str) -> list[str]:
    return [
        f"read_file {{\"path\": {json.dumps(path)}}} (around the lines to change, using offset/limit)",
        (
            f"replace_file_lines {{\"path\": {json.dumps(path)}, \"read_id\": <from that read>, \"start_line\": ..., "
            "\"end_line\": ..., \"new_text\": <the complete new lines>}"
        ),
    ]
