"""A run's own network: a private namespace (its own loopback) with outbound traffic through pasta.

With the network on, a sandbox that shares the server's network namespace also shares its
loopback: the Jupyter server and other runs' servers answer there. ``private`` (the default
whenever the operator turns the network on) gives a bubblewrap sandbox a network namespace of
its own: ``--unshare-net`` makes it, bubblewrap reports the sandbox's pid on ``--info-fd``
and holds the command on ``--block-fd`` until pasta (Debian package ``passt``, a user-mode
network stack) has attached to that namespace and configured its interface. pasta forwards
no port in either direction and does not map the gateway to the host, so only outbound
connections leave; nothing outside reaches in. Before pasta attaches, ``netseal`` makes every
local address of the host (v4 and v6, each one read when the namespace is made) unreachable
from the namespace, since pasta would otherwise relay a connection to one of them onto the
host's own listeners, and multicast unreachable; once pasta made its interface, a filter there
drops what a bound socket sends to those prefixes; ``netwatch`` reseals as the host gains
addresses. Where the host's resolver is on its loopback (``127.0.0.53``), ``dnsrelay`` answers at
that address inside, relaying UDP port 53 to that resolver only. pasta runs in the foreground as
the server's child (it dies with the server) and is stopped when the sandbox ends.

``host`` shares the server's network: the operator's explicit choice, named on every result.
Where pasta, ``/dev/net/tun`` or bubblewrap is missing, ``private`` becomes no network at all
with a note saying why: never, silently, the host's network.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import cache

from kernel_ext.errors import ConfigurationError
from kernel_ext.sandbox import dnsrelay, netseal, netwatch
from kernel_ext.sandbox.nsjoin import Held, close_fd, start_helper

log = logging.getLogger(__name__)

MODES = ("off", "private", "host")
_ALIASES = {"": "private", "on": "private", "1": "private", "true": "private", "yes": "private",
            "auto": "private", "0": "off", "false": "off", "no": "off", "none": "off"}
ATTACH_TIMEOUT_S = 10.0
HOST_LIMIT = ("network: host (the operator's choice): commands share the server's network and loopback, "
              "so the Jupyter server and other runs' servers are reachable")
DNS_LIMIT = ("network: names resolve through a relay to the host's resolver on its loopback ({}): UDP only, so an "
             "answer too large for UDP is not retried over TCP")
# No port forwarded either way (-t/-u inbound, -T/-U from the namespace to the host), no gateway-to-host mapping.
PASTA_OPTIONS = ("--config-net", "--quiet", "-t", "none", "-u", "none", "-T", "none", "-U", "none", "--no-map-gw")


def parse_mode(text: str | None) -> str:
    """``off`` / ``private`` / ``host`` from the operator's setting (``on`` and ``auto`` mean private)."""
    value = (text or "").strip().lower()
    mode = value if value in MODES else _ALIASES.get(value)
    if mode is None:
        raise ConfigurationError(f"BESSER_LLM_SHELL_NETWORK={text!r} is not one of {', '.join(MODES)} "
                                 "(on, 1 and auto mean private; 0 and false mean off)")
    return mode


@cache
def pasta_path() -> str | None:
    return shutil.which("pasta")


@cache
def missing_cause() -> str | None:
    """Why this host cannot give a sandbox a private network with outbound traffic (None: it can)."""
    if pasta_path() is None:
        return "pasta (Debian package passt), which is not installed"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun, which this host does not have"
    if not os.access("/dev/net/tun", os.R_OK | os.W_OK):
        return "/dev/net/tun, which this server's user may not open"
    return netseal.missing_cause()


@dataclass(frozen=True)
class NetPlan:
    """What a sandbox's network will be: on or off, private or shared, and what results must say."""

    mode: str
    network: bool
    private: bool
    limits: tuple[str, ...] = ()


def plan(mode: str, tier: str | None) -> NetPlan:
    """The network a sandbox of ``tier`` (a ``tiers.Tier``, compared by name: this module stays
    light for ``config``) gets for the operator's ``mode``."""
    if mode == "off":
        return NetPlan("off", False, False)
    if mode == "host" or tier == "off":  # unconfined: its own limits already say the network is the server's
        return NetPlan(mode, True, False, (HOST_LIMIT,) if mode == "host" else ())
    cause = "bubblewrap, which is not the active sandbox" if tier != "bwrap" else missing_cause()
    if cause:
        return NetPlan("private", False, False, (
            f"network: off: a private network needs {cause}; commands run without network "
            "(the operator may install passt, or choose host explicitly)",))
    relayed = dnsrelay.loopback_resolvers()
    return NetPlan("private", True, True, (DNS_LIMIT.format(", ".join(relayed)),) if relayed else ())


@dataclass
class Attachment:
    """The pipes between a starting bubblewrap and the pasta that will serve its namespace."""

    info_read: int
    info_write: int
    block_read: int
    block_write: int
    hold: bool = False  # keep the namespace (``held``) for other sandboxes to join (``runnet``)
    held: Held | None = None

    @classmethod
    def open(cls, hold: bool = False) -> Attachment:
        info_read, info_write = os.pipe()
        block_read, block_write = os.pipe()
        return cls(info_read, info_write, block_read, block_write, hold)

    def bwrap_options(self) -> list[str]:
        return ["--info-fd", str(self.info_write), "--block-fd", str(self.block_read)]

    def child_fds(self) -> tuple[int, int]:
        return (self.info_write, self.block_read)

    def started(self) -> None:
        """bubblewrap holds its copies now: close ours (its info pipe reaches EOF when it is done)."""
        for fd in (self.info_write, self.block_read):
            close_fd(fd)
        self.info_write = self.block_read = -1

    def connect(self, timeout: float = ATTACH_TIMEOUT_S) -> str | None:
        """Attach pasta to the sandbox's namespace, then let the command start. A note when outbound failed.

        The command starts either way: without pasta its namespace has a loopback only, never the host's.
        """
        try:
            pid = _child_pid(self.info_read, time.monotonic() + timeout)
            held = Held.of(pid) if pid is not None else None  # opened while bubblewrap holds the process: its own
            if pid is None or held is None:
                return "the sandbox did not report its namespace: no outbound network"
            try:
                _await_loopback(pid, time.monotonic() + timeout)
                guard = netwatch.watch(held)  # watched before the tables are read: no address the host gains is missed
                sealed = guard.reseal()  # before pasta: no moment in which the host's addresses answer
                if sealed is not None:
                    log.warning("a private network was left without outbound traffic: %s", sealed)
                    return f"{sealed}: no outbound network (loopback only)"
                relay = _start_relay(held)  # starts while pasta does
                guard.helpers += [helper for helper in (relay,) if isinstance(helper, subprocess.Popen)]
                pasta, note = _start_pasta(pid, held, timeout)
                if pasta is not None:
                    guard.helpers.append(pasta)
                    fenced = guard.fence(_devices(pid))  # before the command starts: bound sockets filtered too
                    if fenced is not None:
                        log.warning("a private network was left without outbound traffic: %s", fenced)
                        guard.fail()
                        note = f"{fenced}: no outbound network (loopback only)"
                notes = [note, _relay_ready(relay, time.monotonic() + timeout)]
                return "; ".join(note for note in notes if note) or None
            finally:
                if self.hold:
                    self.held = held
                else:
                    held.close()
        finally:
            try:
                os.write(self.block_write, b"1")
            except OSError:
                pass
            self.close()

    def close(self) -> None:
        for fd in (self.info_read, self.info_write, self.block_read, self.block_write):
            close_fd(fd)
        self.info_read = self.info_write = self.block_read = self.block_write = -1




def _child_pid(fd: int, deadline: float) -> int | None:
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            break
        data += chunk
        try:
            return int(json.loads(data)["child-pid"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


def _await_loopback(pid: int, deadline: float) -> None:
    """Wait until bubblewrap has set up the namespace's loopback: pasta configuring it at the same
    time makes bubblewrap's own setup fail (``loopback: Failed RTM_NEWADDR``). Up means ``::1``
    listed, or, without IPv6, ``127.0.0.1`` a local address."""
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/net/if_inet6") as six:
                if any(line.rstrip().endswith(" lo") for line in six):
                    return
        except FileNotFoundError:
            try:
                with open(f"/proc/{pid}/net/fib_trie") as trie:
                    if "127.0.0.1" in trie.read():
                        return
            except OSError:
                return
        except OSError:
            return  # the sandbox is gone (pasta will say so)
        time.sleep(0.002)


def _start_pasta(pid: int, held: Held, timeout: float) -> tuple[subprocess.Popen | None, str | None]:
    """pasta serving ``held``'s namespace until its sandbox ends, ready once the namespace has a default route;
    or None and why not."""
    binary = pasta_path()
    if binary is None:
        return None, "pasta is not installed: no outbound network"
    user, net = held.paths()
    argv = [binary, *PASTA_OPTIONS, "-f", "--runas", str(os.geteuid()), "--userns", user, "--netns", net]
    helper = start_helper(held, argv, "pasta", pass_fds=(held.user, held.net))
    if isinstance(helper, str):
        return None, f"{helper}: no outbound network (loopback only)"
    if not _await_route(pid, helper, time.monotonic() + timeout):
        log.warning("pasta did not configure a sandbox's network (exit %s)", helper.poll())
        return None, "pasta could not set up the sandbox's network: no outbound network (loopback only)"
    return helper, None


def _devices(pid: int) -> list[str]:
    """The namespace's interfaces but its loopback: pasta's."""
    try:
        with open(f"/proc/{pid}/net/dev") as table:
            names = [line.split(":")[0].strip() for line in table.readlines()[2:]]
    except OSError:
        return []
    return [name for name in names if name and name != "lo"]


def _start_relay(held: Held) -> subprocess.Popen | str | None:
    """The DNS relay (``dnsrelay``) when the host's resolver is on its loopback (None: not needed)."""
    resolvers = dnsrelay.loopback_resolvers()
    if not resolvers:
        return None
    argv = [sys.executable, "-I", "-S", dnsrelay.__file__, str(held.user), str(held.net), *resolvers]
    return start_helper(held, argv, "the DNS relay", stdout=subprocess.PIPE, pass_fds=(held.user, held.net))


def _relay_ready(relay: subprocess.Popen | str | None, deadline: float) -> str | None:
    """None once the relay listens (or none was needed); else what results must say."""
    if relay is None:
        return None
    failed = ("names may not resolve: the host's resolver is on its loopback and the relay to it "
              f"{relay if isinstance(relay, str) else 'did not start'}")
    if isinstance(relay, str):
        return failed
    assert relay.stdout is not None
    with relay.stdout:
        line = b""
        while time.monotonic() < deadline and not line.endswith(b"\n"):
            ready, _, _ = select.select([relay.stdout], [], [], max(deadline - time.monotonic(), 0.0))
            chunk = os.read(relay.stdout.fileno(), 64) if ready else b""
            if not chunk:
                break
            line += chunk
    if line.strip() == b"ready":
        return None
    log.warning("the DNS relay did not start (exit %s)", relay.poll())
    return failed


def _await_route(pid: int, helper: subprocess.Popen, deadline: float) -> bool:
    """True once the namespace of ``pid`` has a default route (IPv4 or IPv6): pasta configured it."""
    while time.monotonic() < deadline and helper.poll() is None:
        try:
            with open(f"/proc/{pid}/net/route") as four:
                if any(_default(line.split()[1:2], line.split()[:1]) for line in four):
                    return True
            with open(f"/proc/{pid}/net/ipv6_route") as six:  # not the kernel's "unreachable" ::/0 on lo
                if any(_default(line.split()[:2], line.split()[-1:]) for line in six):
                    return True
        except OSError:
            return False
        time.sleep(0.002)
    return False


def _default(destination: list[str], device: list[str]) -> bool:
    """A route table line's destination fields say "default" and it leaves through pasta's interface."""
    return bool(destination) and all(set(f) == {"0"} for f in destination) and device not in ([], ["lo"])
