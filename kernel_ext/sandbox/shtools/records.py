"""Stored command records: metadata and full streams, addressable by id, surviving restarts.

A result shows a condensed view; the full output lives here and is fetched on demand
(``sh_detail``, ``sh_logs``), never re-emitted. Records sit in the host's state folder,
outside every sandbox, one folder per project (a hash of its path), one folder per record:
``meta.json`` plus ``stdout``/``stderr``/``trace`` files (mode 0600). Ids are checked against
their exact shape before any path is built from them, so an id can never name another file.
A ``no_store`` record lives only in this process's memory. Old records are pruned by age
and count.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, BinaryIO

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox.record import CommandRecord
from kernel_ext.sandbox.shtools.checkpoints import project_key

ID_PATTERN = re.compile(r"^cmd-\d{8}-\d{6}-\d{5,}[0-9a-f]{4}$")
STREAMS = ("stdout", "stderr", "trace")
MAX_RECORDS = 500
MAX_AGE_S = 7 * 24 * 3600
MAX_MEMORY_RECORDS = 200
PRUNE_EVERY = 50
STATE_VAR = "BESSER_SHELL_STATE_DIR"


def default_state_dir() -> Path:
    """Where records and checkpoints live: ``$BESSER_SHELL_STATE_DIR``, else the user's state folder."""
    configured = os.environ.get(STATE_VAR)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "besser-jupyter-agent" / "shell"


def check_id(record_id: str) -> str:
    if not isinstance(record_id, str) or not ID_PATTERN.match(record_id):
        raise ToolFailure(ErrorCode.UNKNOWN_COMMAND_ID,
                          f"{record_id!r} is not a command id (ids look like cmd-20260101-120000-00001a1b2)")
    return record_id


class RecordStore:
    """Records of one project: on disk under ``root`` (None: memory only), plus memory-only ones."""

    def __init__(self, state_dir: str | os.PathLike[str] | None, project: str | os.PathLike[str]):
        self.root = Path(state_dir) / "records" / project_key(project) if state_dir is not None else None
        self._memory: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._writes = 0
        if self.root is not None:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.prune()

    # -- writing ----------------------------------------------------------------------------

    def save(self, meta: dict[str, Any], streams: dict[str, bytes], *, persist: bool = True) -> None:
        """Store a finished record; ``persist=False`` keeps it in memory only (``no_store``)."""
        record_id = check_id(meta["id"])
        if not persist or self.root is None:
            self._remember(record_id, meta, streams)
            return
        folder = self._folder(record_id)
        folder.mkdir(mode=0o700, exist_ok=True)
        for name, data in streams.items():
            if name in STREAMS:
                _write(folder / name, data)
        self.write_meta(meta)
        self._count_write()

    def save_command(self, record: CommandRecord) -> None:
        """A session command's record (``run_command``, ``install_dependencies``), stored like an
        ``sh_run`` one so ``sh_detail`` and ``sh_logs`` read it by the id its result shows."""
        meta = {k: v for k, v in record.as_data().items() if k not in ("stdout", "stderr")}
        meta.update(status="exited", background=False, exit=record.exit_code, running_ms=round(record.duration_ms))
        streams = {name: getattr(record, name).text.encode("utf-8", "replace") for name in ("stdout", "stderr")}
        self.save(meta, streams)

    def open_stream(self, record_id: str, name: str) -> BinaryIO:
        """An unbuffered append handle for a stream written while the command runs (background)."""
        assert self.root is not None and name in STREAMS
        folder = self._folder(check_id(record_id))
        folder.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        return os.fdopen(fd, "ab", buffering=0)

    def write_meta(self, meta: dict[str, Any], *, persist: bool = True) -> None:
        record_id = check_id(meta["id"])
        if not persist or self.root is None:
            with self._lock:
                entry = self._memory.setdefault(record_id, {"meta": {}, "streams": {}})
                entry["meta"] = dict(meta)
            return
        folder = self._folder(record_id)
        folder.mkdir(mode=0o700, exist_ok=True)
        _write(folder / "meta.json", json.dumps(meta, ensure_ascii=False, default=str).encode("utf-8"))

    def _remember(self, record_id: str, meta: dict[str, Any], streams: dict[str, bytes]) -> None:
        with self._lock:
            self._memory[record_id] = {"meta": dict(meta), "streams": dict(streams)}
            while len(self._memory) > MAX_MEMORY_RECORDS:
                self._memory.popitem(last=False)

    # -- reading ----------------------------------------------------------------------------

    def meta(self, record_id: str) -> dict[str, Any]:
        record_id = check_id(record_id)
        with self._lock:
            entry = self._memory.get(record_id)
        if entry is not None:
            return dict(entry["meta"])
        path = self._folder(record_id) / "meta.json" if self.root is not None else None
        try:
            if path is None:
                raise FileNotFoundError
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ToolFailure(ErrorCode.UNKNOWN_COMMAND_ID, f"no stored command {record_id!r} in this project") from None

    def stream(self, record_id: str, name: str, offset: int = 0, limit: int | None = None) -> bytes:
        """Stored bytes of ``name`` from ``offset`` (``b""`` when the stream was never written)."""
        record_id = check_id(record_id)
        with self._lock:
            entry = self._memory.get(record_id)
        if entry is not None:
            data = entry["streams"].get(name, b"")
            return bytes(data[offset : None if limit is None else offset + limit])
        self.meta(record_id)  # unknown ids are refused, not read as empty
        try:
            with open(self._folder(record_id) / name, "rb") as handle:
                handle.seek(offset)
                return handle.read(-1 if limit is None else limit)
        except FileNotFoundError:
            return b""

    def stream_size(self, record_id: str, name: str) -> int:
        with self._lock:
            entry = self._memory.get(check_id(record_id))
        if entry is not None:
            return len(entry["streams"].get(name, b""))
        try:
            return os.stat(self._folder(record_id) / name).st_size if self.root is not None else 0
        except OSError:
            return 0

    def in_memory(self, record_id: str) -> bool:
        with self._lock:
            return record_id in self._memory

    def on_disk(self, record_id: str) -> bool:
        return self.root is not None and (self._folder(check_id(record_id)) / "meta.json").exists()

    # -- housekeeping -----------------------------------------------------------------------

    def prune(self, now: float | None = None) -> int:
        """Remove records older than ``MAX_AGE_S`` and all but the newest ``MAX_RECORDS``."""
        if self.root is None:
            return 0
        now = time.time() if now is None else now
        folders = []
        for entry in os.scandir(self.root):
            if ID_PATTERN.match(entry.name) and entry.is_dir(follow_symlinks=False):
                folders.append((entry.stat(follow_symlinks=False).st_mtime, entry.path))
        folders.sort(reverse=True)
        doomed = [path for i, (mtime, path) in enumerate(folders) if i >= MAX_RECORDS or now - mtime > MAX_AGE_S]
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)
        return len(doomed)

    def _count_write(self) -> None:
        self._writes += 1
        if self._writes % PRUNE_EVERY == 0:
            self.prune()

    def _folder(self, record_id: str) -> Path:
        assert self.root is not None
        return self.root / record_id


def _write(path: Path, data: bytes) -> None:
    """Atomic replace (temporary name, fsync-free: records are a convenience, not a ledger)."""
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(temp, path)
