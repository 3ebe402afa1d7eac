"""Landlock through ctypes: the kernel's unprivileged filesystem (and TCP) access control.

For hosts that forbid user namespaces (many JupyterHub pods), Landlock still confines what a
process tree may read, write and execute, by path, from inside the process itself. Rights are
handled per the kernel's ABI version (1..7); what a version cannot express is reported, never
silently assumed. Only the calling process and its future children are restricted, so this
module is used by the launcher (``launcher.py``) just before it starts the command.
"""

from __future__ import annotations

import ctypes
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:  # without importing typing: this module runs in the launcher's start-up path
    from collections.abc import Iterable

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # same on every arch
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockError(OSError):
    pass


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def abi_version() -> int:
    """The kernel's Landlock ABI (0 when unsupported or disabled at boot)."""
    try:
        value = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(value), 0)


def fs_rights(abi: int) -> int:
    """Every filesystem right the given ABI can handle."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class Ruleset:
    """Paths allowed per access class. Everything else of the handled rights is denied."""

    def __init__(
        self,
        read: Iterable[str] = (),
        write: Iterable[str] = (),
        devices: Iterable[str] = ("/dev",),
        deny_tcp: bool = False,
        listable: Iterable[str] = (),
    ):
        self.read = tuple(read)
        self.write = tuple(write)
        self.devices = tuple(devices)
        self.deny_tcp = deny_tcp
        self.listable = tuple(listable)

    def limits(self, abi: int) -> list[str]:
        """What this ruleset cannot enforce on this kernel, in plain words."""
        notes = ["no PID isolation: other processes of this user are visible, with their command lines "
                 "(not their environments)"]
        if self.deny_tcp and abi < 4:
            notes.append("network not isolated: this kernel's Landlock cannot block TCP")
        elif self.deny_tcp:
            notes.append("network partly isolated: TCP is blocked, UDP and local sockets are not")
        else:
            notes.append("network not isolated")
        if abi < 6:
            notes.append("signals to processes outside the sandbox are not blocked")
        return notes


def restrict_self(rules: Ruleset, abi: int | None = None) -> int:
    """Apply ``rules`` to this process and its future children; returns the ABI used.

    Sets ``no_new_privs`` (required, and it keeps setuid programs from regaining rights).
    Raises ``LandlockError`` when Landlock is unavailable or a rule cannot be added.
    """
    abi = abi_version() if abi is None else abi
    if abi < 1:
        raise LandlockError(0, "Landlock is not available on this kernel")
    handled = fs_rights(abi)
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    if abi >= 4:
        attr.handled_access_net = (NET_BIND_TCP | NET_CONNECT_TCP) if rules.deny_tcp else 0
        size = 16
    if abi >= 6:
        attr.scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET
        size = 24
    libc = _libc()
    ruleset_fd = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset_fd < 0:
        raise _error("landlock_create_ruleset")
    try:
        _add_all(ruleset_fd, rules.listable, READ_DIR)
        _add_all(ruleset_fd, rules.read, READ_RIGHTS & handled)
        _add_all(ruleset_fd, rules.devices, (READ_RIGHTS | WRITE_FILE | TRUNCATE | IOCTL_DEV) & handled)
        _add_all(ruleset_fd, rules.write, handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _error("prctl(NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)) != 0:
            raise _error("landlock_restrict_self")
    finally:
        os.close(ruleset_fd)
    return abi


def _add_all(ruleset_fd: int, paths: Iterable[str], rights: int) -> None:
    for path in paths:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a path that does not exist grants nothing
        try:
            allowed = rights if stat.S_ISDIR(os.fstat(fd).st_mode) else rights & _FILE_RIGHTS
            attr = _PathBeneathAttr(allowed_access=allowed, parent_fd=fd)
            if _libc().syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(attr),
                               ctypes.c_uint32(0)) != 0:
                raise _error(f"landlock_add_rule({path})")
        finally:
            os.close(fd)


def _error(what: str) -> LandlockError:
    err = ctypes.get_errno()
    return LandlockError(err, f"{what}: {os.strerror(err)}")
