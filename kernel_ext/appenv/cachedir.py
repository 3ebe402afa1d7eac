"""The app-environment cache, held as the server's alone: nothing in it is opened through a link.

The cache folder decides what the app imports, so it follows the host-owned cache rules
(``kernel_ext.hostcache``: made 0700, refused when a link, another user's or open to group or others,
every name inside opened no-follow and judged on its descriptor); refused here by name
(``app_env_cache_unsafe``): a lock file planted as a link is never created through, an
``env.json`` or ``site/`` that is a link or another user's makes the entry damaged (rebuilt).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernel_ext import hostcache
from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.hostcache import DIR_FLAGS, discard, foreign, open_dir_at, read_file_at

__all__ = ["DIR_FLAGS", "discard", "foreign", "locked", "open_cache", "open_dir_at", "read_file_at"]


@contextmanager
def open_cache(cache: Path, *, create: bool) -> Iterator[int | None]:
    """The cache folder's descriptor, checked (None when it does not exist and ``create`` is off)."""
    with hostcache.open_cache(cache, _unsafe, create=create) as fd:
        yield fd


@contextmanager
def locked(cache_fd: int, name: str) -> Iterator[None]:
    """An exclusive lock on file ``name`` in the cache (``hostcache.locked``)."""
    with hostcache.locked(cache_fd, name, _lock_unsafe, Path()):
        yield


def _lock_unsafe(_cache: Path, reason: str) -> ToolFailure:
    return ToolFailure(ErrorCode.APP_ENV_CACHE_UNSAFE, f"the app-environment cache {reason}")


def _unsafe(cache: Path, reason: str) -> ToolFailure:
    return ToolFailure(ErrorCode.APP_ENV_CACHE_UNSAFE,
                       f"the app-environment cache {str(cache)!r} {reason}; it must be a private folder of the server's "
                       f"user (fix: chmod 700 {shlex.quote(str(cache))}, or point BESSER_APP_ENV_CACHE elsewhere)",
                       {"cache": str(cache)})
