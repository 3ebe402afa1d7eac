"""Phase 1's output cache: the same model, generator and options give the same files, made once.

A class of thirty generating from one notebook model would otherwise run BESSER's generator and
the output checks thirty times over. The key is everything the output is a function of
(``output_key``): the model's digest (method bodies included), the generator and its validated
options, BESSER's version, this project's version and the source of the modules that shape the
output, the operator's method-bodies mode, the interpreter. Only deterministic in-process
generators over a domain model alone are cached (a confined generator runs other programs, whose
output may carry fresh secrets or times; supabase stamps the time into its migration). The
checks' report is kept beside the files under its own key (the sandbox tier, whether the app
was imported, the interpreter and its package folders), and only
when it is settled (not a failed or unrun app import, which may be the machine's, not the code's).

The folder is host-owned (``kernel_ext.hostcache``: 0700, no-follow, judged on descriptors; an
unsafe folder is not used, and the run says so). An entry is ``<key>/files/...`` plus
``<key>/entry.json`` (written last, the list of files with sizes and hashes); a hit is used only
when every listed file is there, a regular file of the server's alone with that hash, and nothing
else is: any other shape (a link, a missing or changed file, another user's or a group-writable
entry) is discarded and rebuilt. Runs with one key take turns on a lock; the cache is kept under
``BESSER_PHASE1_CACHE_MAX_MB`` by removing the entries used longest ago.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernel_ext import hostcache, safejson
from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.findings import Finding
from kernel_ext.generation.checks import CheckReport
from kernel_ext.generation.targets import GeneratorSpec
from kernel_ext.workspace import treewalk

CACHE_ENV = "BESSER_PHASE1_CACHE"
MAX_MB_ENV = "BESSER_PHASE1_CACHE_MAX_MB"
DEFAULT_MAX_MB = 512
ENTRY = "entry.json"
FILES = "files"
MAX_ENTRY_BYTES = 4 * 1024 * 1024
STALE_STAGE_S = 3600.0
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# the modules whose code decides the bytes a generator call produces (besides BESSER itself)
_SHAPING = ("generation/targets.py", "generation/runner.py", "model/method_bodies.py", "model/names.py")


@dataclass(frozen=True)
class CacheSettings:
    folder: Path | None  # None: the operator turned it off
    max_bytes: int = DEFAULT_MAX_MB * 1024 * 1024

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> CacheSettings:
        env = os.environ if environ is None else environ
        value = (env.get(CACHE_ENV) or "").strip()
        try:
            mb = float(env.get(MAX_MB_ENV) or DEFAULT_MAX_MB)
        except ValueError:
            mb = DEFAULT_MAX_MB
        if value.lower() in ("off", "0", "false", "no") or mb <= 0:
            return cls(None)
        base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return cls(Path(value) if value else Path(base) / "besser-agent" / "phase1", int(mb * 1024 * 1024))


@dataclass
class Cached:
    """What an entry holds: the files (workspace path -> bytes) and, when settled, the checks' report."""

    files: dict[str, bytes]
    checks: CheckReport | None = None
    stubbed: int = 0  # model method bodies the operator's ``off`` made stubs (a warning each generation repeats)


def cacheable(spec: GeneratorSpec, models: Mapping[str, Any]) -> bool:
    """In-process BESSER generators over a domain model alone (see the module docstring)."""
    return spec.kind == "besser" and spec.deterministic and not spec.confined and spec.needs == frozenset({"domain"}) and \
        all(v is None for k, v in models.items() if k != "domain")


def output_key(generator: str, options: Mapping[str, Any], model_digest: str, besser_version: str) -> str:
    """The key of one generation: everything its bytes are a function of (see the module docstring)."""
    from kernel_ext.model.method_bodies import ENV, method_mode
    from kernel_ext.version import __version__

    parts = {"generator": generator, "options": options, "model": model_digest, "besser": besser_version,
             "project": __version__, "shaping": _shaping_digest(), "method_bodies": method_mode(os.environ.get(ENV)),
             "python": sys.version, "implementation": sys.implementation.cache_tag}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:40]


def checks_key(import_app: bool, policy: str | None) -> str:
    """The key of a checks' report over given files: the tier the app import would run under, whether
    it runs, the interpreter and the state of its package folders (a package installed since changes it)."""
    from kernel_ext.sandbox import require_tier

    try:
        tier = str(require_tier(policy).tier)
    except ToolFailure:
        tier = "unavailable"
    folders = []
    here = os.path.realpath(".")
    for entry in sys.path:
        if not entry or os.path.realpath(entry) == here:
            continue  # the current folder: a run writing its output below it changes its time, never an install
        with contextlib.suppress(OSError):
            st = os.stat(entry)
            folders.append([entry, st.st_mtime_ns, st.st_ino])
    parts = [tier, import_app, sys.executable, folders]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:40]


def _shaping_digest() -> str:
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for rel in _SHAPING:
        with contextlib.suppress(OSError):
            digest.update((root / rel).read_bytes())
    return digest.hexdigest()


@contextlib.contextmanager
def slot(settings: CacheSettings, key: str) -> Iterator[Slot]:
    """The entry for ``key``, held under its lock (runs with one key take turns). An unsafe cache
    folder yields a slot that neither reads nor stores, with a note saying why."""
    if settings.folder is None:
        yield Slot(None, key, settings)
        return
    held = contextlib.ExitStack()
    try:
        cache_fd = held.enter_context(hostcache.open_cache(settings.folder, _unsafe, create=True))
        assert cache_fd is not None
        held.enter_context(hostcache.locked(cache_fd, f".{key}.lock", _unsafe, settings.folder))
    except ToolFailure as exc:
        held.close()
        if exc.code != ErrorCode.PHASE1_CACHE_UNSAFE:
            raise
        yield Slot(None, key, settings, [exc.message])
        return
    with held:
        yield Slot(cache_fd, key, settings)


class Slot:
    """One key's entry, its lock held: ``read`` a valid entry, ``store`` a fresh one, ``add_checks``."""

    def __init__(self, cache_fd: int | None, key: str, settings: CacheSettings, notes: list[str] | None = None):
        self.cache_fd = cache_fd
        self.key = key
        self.settings = settings
        self.notes = notes or []

    def read(self, check_key: str) -> Cached | None:
        """The entry when whole and unchanged (the checks' report too when kept under ``check_key``);
        else None, a damaged entry discarded."""
        if self.cache_fd is None:
            return None
        found = _read_entry(self.cache_fd, self.key)
        if found is None:
            hostcache.discard(self.cache_fd, self.key)  # missing, planted or damaged: renamed aside, never followed
            return None
        files, manifest = found
        report = manifest["checks"].get(check_key)
        with contextlib.suppress(OSError):
            os.utime(self.key, dir_fd=self.cache_fd, follow_symlinks=False)  # used now: last to be evicted
        stubbed = manifest.get("stubbed", 0)
        return Cached(files, _report(report) if isinstance(report, dict) else None, stubbed if _is_count(stubbed) else 0)

    def store(self, files: Mapping[str, bytes], check_key: str, checks: CheckReport | None, stubbed: int = 0) -> None:
        """Keep ``files`` (and ``checks`` when settled) as this key's entry, then evict past the size bound."""
        if self.cache_fd is None:
            return
        size = sum(len(b) for b in files.values())
        if size > self.settings.max_bytes:
            return
        stage = f".stage-{secrets.token_hex(8)}"
        os.mkdir(stage, 0o700, dir_fd=self.cache_fd)
        try:
            stage_fd = hostcache.open_dir_at(self.cache_fd, stage)
            if stage_fd is None:
                return
            try:
                _write_tree(stage_fd, files)
                manifest = {"key": self.key, "bytes": size, "stored_at": time.time(), "stubbed": stubbed,
                            "files": [[p, hashlib.sha256(b).hexdigest(), len(b)] for p, b in sorted(files.items())],
                            "checks": {check_key: _report_dict(checks)} if checks is not None and checks.settled else {}}
                _write_file(stage_fd, ENTRY, json.dumps(manifest).encode())
            finally:
                os.close(stage_fd)
            hostcache.discard(self.cache_fd, self.key)
            os.rename(stage, self.key, src_dir_fd=self.cache_fd, dst_dir_fd=self.cache_fd)
        except BaseException:
            hostcache.discard(self.cache_fd, stage)
            raise
        _evict(self.cache_fd, self.key, self.settings.max_bytes)

    def add_checks(self, check_key: str, checks: CheckReport) -> None:
        """Keep a settled ``checks`` report beside the entry's files (entry.json replaced whole)."""
        if self.cache_fd is None or not checks.settled:
            return
        entry = hostcache.open_dir_at(self.cache_fd, self.key)
        if entry is None:
            return
        try:
            manifest = _manifest(hostcache.read_file_at(entry, ENTRY, MAX_ENTRY_BYTES))
            if manifest is None:
                return
            manifest["checks"][check_key] = _report_dict(checks)
            fresh = f".{ENTRY}.{secrets.token_hex(4)}"
            _write_file(entry, fresh, json.dumps(manifest).encode())
            os.rename(fresh, ENTRY, src_dir_fd=entry, dst_dir_fd=entry)
        finally:
            os.close(entry)


def _unsafe(cache: Path, reason: str) -> ToolFailure:
    return ToolFailure(ErrorCode.PHASE1_CACHE_UNSAFE,
                       f"the Phase 1 cache {str(cache)!r} {reason}, so it was not used; it must be a folder of the "
                       f"server's user that no one else can write (chmod 700 it, or point {CACHE_ENV} elsewhere)")


def _read_entry(cache_fd: int, key: str) -> tuple[dict[str, bytes], dict[str, Any]] | None:
    """(files, manifest) of entry ``key`` read through descriptors, or None when it is not exactly
    what its manifest lists (each file regular, the server's alone, of that size and hash)."""
    entry = hostcache.open_dir_at(cache_fd, key)
    if entry is None:
        return None
    try:
        manifest = _manifest(hostcache.read_file_at(entry, ENTRY, MAX_ENTRY_BYTES))
        if manifest is None:
            return None
        listed = {p: (h, n) for p, h, n in manifest["files"]}
        files_fd = hostcache.open_dir_at(entry, FILES)
        if files_fd is None:
            return None
        try:
            files = _read_files(files_fd, listed)
        finally:
            os.close(files_fd)
        return (files, manifest) if files is not None else None
    finally:
        os.close(entry)


def _is_count(value: object) -> bool:
    """A whole number of at least 0 (JSON's true/false and floats such as Infinity are not)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _manifest(data: bytes | None) -> dict[str, Any] | None:
    """The entry's manifest when every field the cache reads has its shape (``files`` as [path, sha256,
    size] rows, ``checks`` a mapping of reports, ``bytes`` a count), else None: a file that is anything else
    is a damaged entry (planted or torn), discarded and rebuilt, never a traceback."""
    if data is None:
        return None
    try:
        manifest = safejson.loads(data)
    except ValueError:
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        return None
    rows = manifest["files"]
    if not all(isinstance(r, list) and len(r) == 3 and isinstance(r[0], str) and isinstance(r[1], str) and _is_count(r[2])
               for r in rows):
        return None
    checks = manifest.setdefault("checks", {})
    if not isinstance(checks, dict) or not all(isinstance(r, dict) for r in checks.values()):
        return None
    if not _is_count(manifest.get("bytes", 0)):
        return None
    return manifest


def _read_files(files_fd: int, listed: dict[str, tuple[str, int]]) -> dict[str, bytes] | None:
    notes: treewalk.Notes = treewalk.Notes()
    files: dict[str, bytes] = {}
    for rel, fd, st in treewalk.regular_files(files_fd, frozenset(), notes):
        expected = listed.get(rel)
        if expected is None or hostcache.foreign(st) or st.st_size != expected[1]:
            return None
        data = b"".join(treewalk.read_chunks(fd, expected[1]))
        if hashlib.sha256(data).hexdigest() != expected[0]:
            return None
        files[rel] = data
    if notes or set(files) != set(listed):
        return None  # a link, a special file, a missing file
    for _rel, _parent, _name, st in treewalk.walk_at(files_fd):
        if stat.S_ISDIR(st.st_mode) and hostcache.foreign(st):
            return None
    return files


def _write_tree(stage_fd: int, files: Mapping[str, bytes]) -> None:
    os.mkdir(FILES, 0o700, dir_fd=stage_fd)
    root = hostcache.open_dir_at(stage_fd, FILES)
    assert root is not None
    try:
        for path, data in sorted(files.items()):
            *folders, name = path.split("/")
            parent = root
            opened: list[int] = []
            try:
                for folder in folders:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(folder, 0o700, dir_fd=parent)
                    parent = treewalk.open_dir(folder, parent)
                    opened.append(parent)
                _write_file(parent, name, data)
            finally:
                for fd in opened:
                    os.close(fd)
    finally:
        os.close(root)


def _write_file(dir_fd: int, name: str, data: bytes) -> None:
    fd = os.open(name, _NEW_FILE, 0o600, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _evict(cache_fd: int, keep: str, max_bytes: int) -> None:
    """Remove the entries used longest ago until the rest fit ``max_bytes`` (and stages left by a crash)."""
    entries: list[tuple[float, int, str]] = []
    now = time.time()
    for name in os.listdir(cache_fd):
        try:
            st = os.stat(name, dir_fd=cache_fd, follow_symlinks=False)
        except OSError:
            continue
        if name.startswith((".stage-", ".discard-")) and now - st.st_mtime > STALE_STAGE_S:
            hostcache.discard(cache_fd, name)
        elif not name.startswith(".") and stat.S_ISDIR(st.st_mode):
            size = _entry_bytes(cache_fd, name)
            if size is None and name != keep:
                hostcache.discard(cache_fd, name)  # damaged: it would never be read, so it holds no place
            else:
                entries.append((st.st_mtime, size or 0, name))
    total = sum(size for _, size, _ in entries)
    for _, size, name in sorted(entries):
        if total <= max_bytes:
            break
        if name != keep:
            hostcache.discard(cache_fd, name)
            total -= size


def _entry_bytes(cache_fd: int, name: str) -> int | None:
    """The size an entry's manifest records, or None when the entry is damaged (no valid manifest)."""
    entry = hostcache.open_dir_at(cache_fd, name)
    if entry is None:
        return None
    try:
        manifest = _manifest(hostcache.read_file_at(entry, ENTRY, MAX_ENTRY_BYTES))
        return None if manifest is None else manifest.get("bytes", 0)
    finally:
        os.close(entry)


def _report_dict(report: CheckReport | None) -> dict[str, Any]:
    assert report is not None
    return {"findings": [asdict(f) for f in report.findings], "python_files": report.python_files,
            "app_import": report.app_import, "app_import_tier": report.app_import_tier}


def _report(data: dict[str, Any]) -> CheckReport | None:
    try:
        findings = [Finding(**{k: v for k, v in f.items() if k in Finding.__dataclass_fields__}) for f in data["findings"]]
        return CheckReport(findings, int(data["python_files"]), str(data["app_import"]), str(data["app_import_tier"]))
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):  # a report of another shape: run the checks
        return None
