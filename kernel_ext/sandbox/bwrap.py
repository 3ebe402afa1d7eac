"""The bubblewrap argument list for a ``Confinement``.

New user, PID, IPC, UTS (and cgroup where possible) namespaces, all capabilities dropped, a
new session (no terminal injection) and death with the parent. The root is empty: only the
system folders and the interpreter are mounted, read-only, so other runs' workspaces, the
server's state and the host's home directories simply do not exist inside. ``/proc``,
``/dev`` and ``/tmp`` are private; ``/run`` is an empty tmpfs (with the resolver folders
re-mounted when the network is on, so DNS keeps working and daemon sockets stay out).
Sensitive files under ``/etc`` are masked. Mounts are ordered parents-first, so a read-only
interpreter inside a writable folder (or a writable workspace inside a hidden one) works.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from kernel_ext.sandbox.spec import (
    RESOLVER_DIRS,
    Confinement,
    is_within,
    sensitive_paths,
    system_dirs,
)

NAMESPACE_FLAGS = (
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
)

# Mount kinds, in the order they apply at equal depth.
_RO, _MASK, _RW = 0, 1, 2


@lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def bwrap_argv(conf: Confinement, argv: Sequence[str], *, executable: str | None = None) -> list[str]:
    """``bwrap [flags and mounts] -- argv`` for ``conf``; ``argv[0]`` is resolved inside."""
    return [executable or bwrap_path() or "bwrap", *bwrap_options(conf), "--", *argv]


def bwrap_options(conf: Confinement, *, joined: bool = False) -> list[str]:
    """The flags and mounts for ``conf`` (what a parked launcher hands bubblewrap through ``--args``);
    ``joined``: a private network already entered (the run's, ``runnet``) is kept, not replaced."""
    args = [*NAMESPACE_FLAGS, "--hostname", "sandbox"]
    if not conf.network or (conf.private_net and not joined):  # private: pasta serves the new namespace (netns)
        args.append("--unshare-net")
    elif joined:  # entered as the namespace owner's mapped root: the command keeps the server's own ids
        args += ["--uid", str(os.getuid()), "--gid", str(os.getgid())]
    args += _base_mounts(conf.network)
    args += _mounts(conf)
    args += ["--chdir", str(conf.working_dir())]
    return args


@lru_cache(maxsize=2)
def _base_mounts(network: bool) -> tuple[str, ...]:
    """System folders, private /proc, /dev, /tmp, the /run mask (the same for every sandbox)."""
    args: list[str] = []
    for top in system_dirs():
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        else:
            args += ["--ro-bind", top, top]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
    args += ["--tmpfs", "/run"]
    if network:
        for folder in RESOLVER_DIRS:
            if os.path.isdir(folder):
                args += ["--ro-bind", folder, folder]
    return tuple(args)


def _mounts(conf: Confinement) -> list[str]:
    """Interpreter (read-only), masks, writable folders: parents before children."""
    planned: list[tuple[int, int, str]] = [(_depth(p), _MASK, p) for p in _sensitive_masks()]
    planned += [(_depth(str(p)), _RO, str(p)) for p in conf.readonly_paths()]
    planned += [(_depth(str(p)), _MASK, str(p)) for p in conf.hidden if _visible(p, conf)]
    planned += [(_depth(str(p)), _RW, str(p)) for p in conf.writable_paths()]
    args: list[str] = []
    for _, kind, text in sorted(planned):
        if kind == _RO:
            args += ["--ro-bind", text, text]
        elif kind == _RW:
            args += ["--bind", text, text]
        elif os.path.isdir(text) and not os.path.islink(text):
            args += ["--perms", "0555", "--tmpfs", text]
        else:
            args += ["--ro-bind", "/dev/null", text]
    return args


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


@lru_cache(maxsize=1)
def _sensitive_masks() -> tuple[str, ...]:
    """Sensitive host files under the (always mounted) system folders, found once per process."""
    return tuple(str(p) for p in sensitive_paths())


def _visible(path: Path, conf: Confinement) -> bool:
    """A mask is only needed where something mounted would otherwise show ``path``."""
    roots = [Path(d) for d in system_dirs()] + list(conf.readonly_paths()) + list(conf.writable_paths())
    return os.path.lexists(path) and any(is_within(path, root) for root in roots)
