"""What a sandbox must allow, independent of the tier that enforces it.

A ``Confinement`` names the writable set (the run's workspace, its ``$HOME``, extras the
host adds), the read-only set (system folders, the interpreter the server runs under,
wherever it lives, ``/tmp`` included), what must stay hidden, and whether the network is on.
``bwrap.py`` turns it into mounts, ``landlock.py`` into a ruleset; both read the same lists
here, so the two tiers cannot drift apart. ``private_net``: the network is on through a namespace
of the sandbox's own (``netns``), not the server's; ``network_limits`` are what results say about it.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# Top-level system folders visible read-only (when present). ``/sys`` is informational only.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys")
# Host files a sandboxed command must never read, even as the same user (globs under /etc).
SENSITIVE_PATTERNS = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
    "/etc/ssh/ssh_host_*key", "/etc/ssl/private", "/etc/security/opasswd", "/etc/credstore",
    "/etc/credstore.encrypted",
)
# Resolver folders a networked sandbox may need (``/etc/resolv.conf`` often links into them).
RESOLVER_DIRS = ("/run/systemd/resolve", "/run/resolvconf", "/run/NetworkManager")


@dataclass(frozen=True)
class Confinement:
    """The writable, readable and hidden sets of one sandbox (absolute, resolved paths)."""

    workspace: Path
    home: Path
    network: bool = False
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    cwd: Path | None = None
    private_net: bool = False
    network_limits: tuple[str, ...] = ()

    @classmethod
    def for_run(
        cls,
        workspace: str | os.PathLike[str],
        home: str | os.PathLike[str],
        *,
        network: bool = False,
        writable: Iterable[str | os.PathLike[str]] = (),
        readable: Iterable[str | os.PathLike[str]] = (),
        hidden: Iterable[str | os.PathLike[str]] = (),
        cwd: str | os.PathLike[str] | None = None,
        private_net: bool = False,
        network_limits: tuple[str, ...] = (),
    ) -> Confinement:
        real = _resolve
        return cls(
            workspace=real(workspace),
            home=real(home),
            network=network,
            writable=tuple(real(p) for p in writable),
            readable=tuple(real(p) for p in readable),
            hidden=tuple(real(p) for p in hidden),
            cwd=real(cwd) if cwd is not None else None,
            private_net=private_net and network,
            network_limits=network_limits,
        )

    @property
    def network_mode(self) -> str:
        """``private`` (a namespace of its own), ``host`` (the server's network) or ``off``."""
        return "private" if self.private_net else "host" if self.network else "off"

    def writable_paths(self) -> tuple[Path, ...]:
        return _unique((self.workspace, self.home, *self.writable))

    def readonly_paths(self) -> tuple[Path, ...]:
        """Interpreter folders and extra readable paths (system folders are listed separately)."""
        return _unique((*interpreter_paths(), *self.readable))

    def tmpdir(self, private_tmp: bool) -> str:
        """The temp dir commands use: a private ``/tmp`` when the tier has one, else inside ``$HOME``."""
        return "/tmp" if private_tmp else str(self.home / ".tmp")

    def working_dir(self) -> Path:
        return self.cwd or self.workspace


def _resolve(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(os.fspath(path)))


def _unique(paths: Iterable[Path]) -> tuple[Path, ...]:
    out: list[Path] = []
    for path in paths:
        if path not in out:
            out.append(path)
    return tuple(out)


def is_within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


@lru_cache(maxsize=1)
def interpreter_paths() -> tuple[Path, ...]:
    """Folders the server's interpreter needs, outside the system folders, read-only.

    The venv (``sys.prefix``), the base installation (``sys.base_prefix``), the real
    executable's installation, and this package's own folder (so host helpers can run
    inside). Wherever they live, ``/tmp`` or a home directory included.
    """
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    real_exe = os.path.realpath(sys.executable)
    candidates.append(os.path.dirname(os.path.dirname(real_exe)))
    candidates.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    system = [_resolve(d) for d in SYSTEM_DIRS if os.path.isdir(d)]
    out: list[Path] = []
    for candidate in candidates:
        path = _resolve(candidate)
        if path == Path("/") or not path.is_dir():
            continue
        if any(is_within(path, s) for s in system):
            continue
        out.append(path)
    # Drop folders already inside another listed folder.
    return tuple(p for p in _unique(out) if not any(q != p and is_within(p, q) for q in out))


def system_dirs() -> tuple[str, ...]:
    return tuple(d for d in SYSTEM_DIRS if os.path.lexists(d))


def sensitive_paths() -> tuple[Path, ...]:
    """Existing sensitive host paths (never followed: a link is masked as itself)."""
    found: list[Path] = []
    for pattern in SENSITIVE_PATTERNS:
        found.extend(Path(p) for p in sorted(glob.glob(pattern)))
    return tuple(found)


def split_around(roots: Iterable[Path], excluded: Iterable[Path]) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """``roots`` with ``excluded`` carved out: ``(allowed, list_only)``.

    A root containing an excluded path is replaced by its children (recursively), minus the
    excluded ones; the split folders themselves stay listable (names only). Used where a
    tier can only allow, not deny (Landlock).
    """
    excluded = tuple(excluded)
    allowed: list[Path] = []
    listable: list[Path] = []
    for root in roots:
        _split(root, excluded, allowed, listable)
    return tuple(allowed), tuple(listable)


def _split(root: Path, excluded: tuple[Path, ...], allowed: list[Path], listable: list[Path]) -> None:
    if any(is_within(root, e) for e in excluded):
        return
    if not any(e != root and is_within(e, root) for e in excluded):
        allowed.append(root)
        return
    listable.append(root)
    try:
        children = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for child in children:
        _split(Path(child.path), excluded, allowed, listable)
