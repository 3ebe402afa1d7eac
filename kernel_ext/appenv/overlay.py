"""Building and caching an overlay: the packages an app needs that the server lacks, in one folder.

One overlay per requirements set (and interpreter), kept under the operator's cache folder as
``<key>/site`` with an ``env.json`` written last (its presence means complete). A build runs
``pip install --target`` in a one-off sandbox that can write only its scratch folder, sees a
wheelhouse read-only, and reaches the network only when the operator allowed it; the folder is
renamed into place when pip succeeded and the result fits the size limit. Concurrent builds of
one key wait on a lock file, so the second run reuses the first one's overlay. Every name in the
cache is opened no-follow and checked on its descriptor (``cachedir``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kernel_ext import safejson
from kernel_ext.appenv.cachedir import DIR_FLAGS, discard, locked, open_cache, open_dir_at, read_file_at
from kernel_ext.appenv.settings import AppEnvSettings
from kernel_ext.errors import ErrorCode, ToolFailure

MANIFEST = "env.json"
MAX_MANIFEST_BYTES = 1024 * 1024
INDEX_VARIABLES = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST")
_NOT_FOUND = re.compile(r"(?:No matching distribution found for|Could not find a version that satisfies the requirement) "
                        r"([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class Overlay:
    key: str
    site: Path
    packages: tuple[tuple[str, str], ...]  # (name, version) installed there
    built_s: float | None = None  # set when this call built it; None: reused from the cache


class BuildFailed(Exception):
    """pip could not provide the requirements: ``names`` it could not find, ``detail`` its last error line."""

    def __init__(self, names: tuple[str, ...], detail: str):
        super().__init__(detail)
        self.names = names
        self.detail = detail


def overlay_key(requirements: Sequence[Requirement]) -> str:
    """The cache key: the interpreter (version, implementation, machine) and the sorted requirements."""
    tag = f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}-{platform.machine()}"
    lines = sorted(f"{canonicalize_name(r.name)}{r.specifier}{sorted(r.extras)}" for r in requirements)
    return hashlib.sha256(json.dumps([tag, lines]).encode()).hexdigest()[:24]


def cached_overlay(settings: AppEnvSettings, key: str) -> Overlay | None:
    """The complete overlay for ``key``, or None (a half-built, damaged or planted entry counts as none).

    Raises ``ToolFailure(app_env_cache_unsafe)`` when the cache folder is not the server's alone."""
    with open_cache(settings.cache, create=False) as cache_fd:
        return None if cache_fd is None else _entry(cache_fd, settings, key)


def _entry(cache_fd: int, settings: AppEnvSettings, key: str) -> Overlay | None:
    """Entry ``key`` read through descriptors: the folder, its ``site/`` and ``env.json``, each
    no-follow and the server's alone. Names inside a checked cache are stable to anyone else, so
    the ``site`` path handed to the app host is the folder checked here."""
    entry = open_dir_at(cache_fd, key, private=True)
    if entry is None:
        return None
    try:
        site = open_dir_at(entry, "site")
        if site is None:
            return None
        os.close(site)
        data = read_file_at(entry, MANIFEST, MAX_MANIFEST_BYTES)
    finally:
        os.close(entry)
    if data is None:
        return None
    try:
        manifest = safejson.loads(data)
        packages = tuple((str(n), str(v)) for n, v in manifest.get("packages", []))
    except (ValueError, TypeError, AttributeError):
        return None
    return Overlay(key, settings.cache / key / "site", packages)


def _real_dir(path: Path) -> bool:
    """A directory, not a link to one (the cache is the server user's; nothing follows a link in it)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def ensure_overlay(requirements: Sequence[Requirement], settings: AppEnvSettings, *, policy: str | None = None) -> Overlay:
    """The overlay for ``requirements``: from the cache, else built now in the sandbox.

    Raises ``BuildFailed`` when pip could not provide them, ``ToolFailure`` when the sandbox
    cannot start, the build passes its limits, or the cache is not the server's alone.
    """
    key = overlay_key(requirements)
    found = cached_overlay(settings, key)
    if found is not None:
        return found
    with open_cache(settings.cache, create=True) as cache_fd:
        assert cache_fd is not None  # made when missing
        with locked(cache_fd, f".{key}.lock"):
            found = _entry(cache_fd, settings, key)  # built by another run while we waited
            if found is not None:
                return found
            discard(cache_fd, key)  # a damaged or planted entry: renamed aside, never followed
            return _build(requirements, settings, key, policy)


def _build(requirements: Sequence[Requirement], settings: AppEnvSettings, key: str, policy: str | None) -> Overlay:
    from kernel_ext.sandbox import run_confined

    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix=f".build-{key}-", dir=settings.cache))
    try:
        (scratch / "requirements.txt").write_text("".join(f"{r}\n" for r in requirements), encoding="utf-8")
        argv = [sys.executable, "-m", "pip", "install", "--target", str(scratch / "site"), "--no-input",
                "--disable-pip-version-check", "--no-warn-script-location", "--progress-bar", "off",
                "-r", str(scratch / "requirements.txt")]
        if not settings.network:
            argv.append("--no-index")
        readable: list[Path] = []
        if settings.wheelhouse is not None:
            argv += ["--find-links", str(settings.wheelhouse)]
            readable.append(settings.wheelhouse)
        # With the index allowed, pip keeps the operator's index settings (a value that looks like a
        # credential is still removed by the sandbox's scrub); offline, nothing of them is passed.
        index = {k: os.environ[k] for k in INDEX_VARIABLES if settings.network and k in os.environ}
        record = run_confined(argv, scratch, settings.build_seconds, network=settings.network, cwd=scratch, env=index,
                              readable=readable, policy=policy, spill_output=False, label="app environment build")
        if not record.ok:
            text = f"{record.view('stdout', 20_000)[0]}\n{record.view('stderr', 20_000)[0]}"
            names = tuple(dict.fromkeys(canonicalize_name(n) for n in _NOT_FOUND.findall(text)))
            raise BuildFailed(names, _last_error(text) or record.status_line())
        return _seal(scratch, settings, key, requirements, started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _seal(scratch: Path, settings: AppEnvSettings, key: str, requirements: Sequence[Requirement], started: float) -> Overlay:
    """The host's half after pip. Everything in ``scratch`` was written inside the sandbox (a package's
    build may run its own code there), so nothing in it is trusted: ``site`` must be a real folder,
    not a link; the package list comes from its ``*.dist-info`` folder names, no file in it is read;
    and the manifest is written into a folder the host makes afterwards, never through a name the
    sandbox could have planted."""
    site = scratch / "site"
    if not _real_dir(site):
        raise ToolFailure(ErrorCode.REQUIREMENTS_UNMET, "the app environment's build left no package folder (missing, or a link)")
    size = _size(site)
    if size > settings.max_bytes:
        raise ToolFailure(ErrorCode.REQUIREMENTS_UNMET,
                          f"the app's environment would take {size // 2**20} MiB, over the operator's limit of "
                          f"{settings.max_bytes // 2**20} MiB (BESSER_APP_ENV_MAX_MB)")
    packages = _installed(site)
    built_s = round(time.perf_counter() - started, 2)
    manifest = {"key": key, "requirements": [str(r) for r in requirements], "packages": packages,
                "python": sys.version.split()[0], "interpreter": sys.executable, "built_s": built_s,
                "sources": settings.sources()}
    sealed = Path(tempfile.mkdtemp(prefix=f".seal-{key}-", dir=settings.cache))
    try:
        os.rename(site, sealed / "site")
        _private_folder(sealed / "site")
        with open(sealed / MANIFEST, "x", encoding="utf-8") as handle:
            handle.write(json.dumps(manifest, indent=1))
        os.replace(sealed, settings.cache / key)
    finally:
        shutil.rmtree(sealed, ignore_errors=True)  # gone already when the rename succeeded
    return Overlay(key, settings.cache / key / "site", packages, built_s)


def _private_folder(folder: Path) -> None:
    """Mode 0755 on ``folder`` (opened no-follow), whatever umask the build ran with: a cached
    entry is used only when it and its ``site/`` are writable by no one but the server's user."""
    fd = os.open(folder, DIR_FLAGS)
    try:
        os.fchmod(fd, 0o755)
    finally:
        os.close(fd)


def _installed(site: Path) -> tuple[tuple[str, str], ...]:
    """(name, version) of each distribution, from its ``<name>-<version>.dist-info`` folder name."""
    found = set()
    with os.scandir(site) as entries:
        for entry in entries:
            if entry.name.endswith(".dist-info") and entry.is_dir(follow_symlinks=False):
                name, _, version = entry.name.removesuffix(".dist-info").rpartition("-")
                if name and version:
                    found.add((canonicalize_name(name), version))
    return tuple(sorted(found))


def _last_error(text: str) -> str:
    errors = [line.strip() for line in text.splitlines() if line.strip().startswith("ERROR:")]
    return errors[-1][:300] if errors else ""


def _size(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total
