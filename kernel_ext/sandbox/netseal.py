"""The host's own addresses, unreachable from a private network namespace.

pasta relays a namespace's outbound connection through a socket on the host. A destination that
is one of the host's local addresses (a second address on ``lo``, an address on ``eth0``,
``docker0`` or a VPN, a ``0.0.0.0`` listener reached through any of them) would therefore land on
the host's own listeners: the Jupyter server and other runs' servers. pasta has no option that
refuses local destinations, so the namespace refuses them itself: before pasta is attached (and
before the command runs) it gets one policy rule per host-local prefix, ``unreachable``, at a
preference after the namespace's own ``local`` table (so its own loopback and the address pasta
copies into it stay its own) and before ``main`` (so no route pasta adds, and no interface scope
of a link-local address, gets around it). The prefixes are read from the server's own kernel
tables when each namespace is made (and again before each command of a run: ``runnet``), IPv4
(``/proc/net/fib_trie``: ``LOCAL`` entries, AnyIP ranges included) and IPv6 (``/proc/net/if_inet6``
and ``/proc/net/ipv6_route``: local and anycast entries).

Two things get past a policy rule, so the seal has two more parts. Multicast: IPv6 keeps its
``ff00::/8`` route in the ``local`` table, which is looked up first, and pasta relays what is sent
there onto the host (where it loops back to a ``[::]`` listener); so inside, ``local`` moves after
a rule making ``ff00::/8`` unreachable (IPv4's ``224.0.0.0/4`` and ``255.255.255.255`` are plain
rules). A socket bound to pasta's interface (``SO_BINDTODEVICE``, ``IP_UNICAST_IF``,
``IP_MULTICAST_IF``): IPv4 treats a failed route lookup with an output interface as "on link" and
sends anyway, and sends link-local multicast and broadcast without a lookup at all. So, once pasta
has made its interface, an egress filter on it (``tc``: an HTB class whose queue holds nothing, and
one ``u32`` match per sealed IPv4 prefix, multicast and broadcast) drops what is sent there. IPv6
has no such fallback (a bound socket gets the rule's "unreachable").

The sandboxed command cannot remove the rules: bubblewrap drops every capability and the network
namespace belongs to bubblewrap's user namespace, not to one the command could make. Installing
them needs ``nsenter`` (util-linux), ``ip`` and ``tc`` (iproute2); where either is missing or a rule
fails, the caller gives the namespace no outbound network at all (never the host's addresses).
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernel_ext.sandbox.nsjoin import Held

RULE_PREFERENCE = 100  # after "lookup local" (0, or 50 for IPv6), before "lookup main" (32766)
# Made once per namespace, before any host prefix: multicast (and IPv4 broadcast) never leaves.
FENCE_RULES = {
    6: "rule add pref 10 to ff00::/8 unreachable\nrule add pref 50 lookup local\nrule del pref 0 lookup local\n",
    4: f"rule add pref {RULE_PREFERENCE} to 224.0.0.0/4 unreachable\nrule add pref {RULE_PREFERENCE} to 255.255.255.255 unreachable\n",
}
FENCE_PREFIXES = ("224.0.0.0/4", "255.255.255.255/32")
_RTF_LOCAL, _RTF_ANYCAST = 0x80000000, 0x00100000
Prefix = ipaddress.IPv4Network | ipaddress.IPv6Network


@cache
def tools() -> tuple[str, str, str] | None:
    """``(nsenter, ip, tc)`` when all are installed."""
    nsenter, ip, tc = shutil.which("nsenter"), shutil.which("ip") or _sbin("ip"), shutil.which("tc") or _sbin("tc")
    return (nsenter, ip, tc) if nsenter and ip and tc else None


def _sbin(name: str) -> str | None:
    return shutil.which(name, path="/usr/sbin:/sbin")


def missing_cause() -> str | None:
    """What sealing a namespace needs that this host lacks (None: nothing)."""
    if tools() is None:
        return "nsenter (util-linux), ip and tc (iproute2) to keep the host's addresses out, which are not installed"
    return None


def host_prefixes() -> list[Prefix]:
    """Every destination the server's network namespace delivers to itself, now (IPv4 and IPv6)."""
    return [*_ipv4_local(), *_ipv6_local()]


def _ipv4_local() -> list[Prefix]:
    """``LOCAL`` leaves of the fib trie: each address and each AnyIP range (``127.0.0.0/8``) the host owns."""
    found: list[Prefix] = []
    try:
        with open("/proc/net/fib_trie") as trie:
            leaf = ""
            for line in trie:
                text = line.strip()
                if text.startswith("|--"):
                    leaf = text[3:].strip()
                elif text.startswith("/") and text.endswith(" LOCAL") and leaf:
                    prefix = ipaddress.ip_network(f"{leaf}/{text[1:].split()[0]}", strict=False)
                    if prefix not in found:
                        found.append(prefix)
    except (OSError, ValueError):
        pass
    return found


def _ipv6_local() -> list[Prefix]:
    """Every IPv6 address of the host (``if_inet6``: listed from the moment it is added, before its local
    route is), and the local and anycast entries of the routing tables (AnyIP ranges)."""
    found: list[Prefix] = []
    try:
        with open("/proc/net/if_inet6") as addresses:
            for line in addresses:
                fields = line.split()
                address = ipaddress.ip_network(f"{ipaddress.IPv6Address(bytes.fromhex(fields[0]))}/128") if fields else None
                if address is not None and address not in found:
                    found.append(address)
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/net/ipv6_route") as routes:
            for line in routes:
                fields = line.split()
                if len(fields) < 10 or not int(fields[8], 16) & (_RTF_LOCAL | _RTF_ANYCAST):
                    continue
                start = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
                prefix = ipaddress.ip_network(f"{start}/{int(fields[1], 16)}", strict=False)
                if prefix not in found:
                    found.append(prefix)
    except (OSError, ValueError):  # no IPv6 on this host
        pass
    return found


def rule_batches(prefixes: list[Prefix]) -> dict[int, str]:
    """``ip -batch`` text per family (4, 6): one ``unreachable`` rule per prefix."""
    batches: dict[int, list[str]] = {4: [], 6: []}
    for prefix in prefixes:
        batches[prefix.version].append(f"rule add pref {RULE_PREFERENCE} to {prefix} unreachable\n")
    return {family: "".join(lines) for family, lines in batches.items() if lines}


def filter_batch(device: str, prefixes: list[Prefix], initial: bool) -> str:
    """``tc -batch`` text dropping what leaves ``device`` for each IPv4 prefix of ``prefixes`` (and, the first
    time, the queue that holds nothing, multicast and broadcast)."""
    lines = []
    if initial:
        lines += [f"qdisc add dev {device} root handle 1: htb default 1 r2q 1000000",
                  f"class add dev {device} parent 1: classid 1:1 htb rate 100gbit",
                  f"class add dev {device} parent 1: classid 1:2 htb rate 8bit quantum 1500",
                  f"qdisc add dev {device} parent 1:2 handle 2: pfifo limit 0"]
        prefixes = [*(ipaddress.ip_network(text) for text in FENCE_PREFIXES), *prefixes]
    lines += [f"filter add dev {device} parent 1: protocol ip prio 1 u32 match ip dst {prefix} flowid 1:2"
              for prefix in prefixes if prefix.version == 4]
    return "".join(f"{line}\n" for line in lines)


def seal(held: Held, timeout: float, prefixes: list[Prefix] | None = None, initial: bool = False) -> str | None:
    """Make every host-local prefix (or those of ``prefixes``) unreachable in ``held``'s network namespace
    (a note when not done); ``initial``: the namespace's multicast rules too (once, before pasta). The user
    namespace owning it is joined, so the rules are written as the server's own user."""
    if tools() is None:
        return missing_cause()
    batches = rule_batches(host_prefixes() if prefixes is None else prefixes)
    if initial:
        batches = {family: FENCE_RULES[family] + batches.get(family, "") for family in (4, 6)}
    failed = _run(held, timeout, [(["-" + str(family), "-batch", "-"], text) for family, text in batches.items()], "ip")
    return f"the host's own addresses could not be kept out of the sandbox's network ({failed})" if failed else None


def fence(held: Held, timeout: float, devices: list[str], prefixes: list[Prefix], initial: bool) -> str | None:
    """Drop, on pasta's interface(s), what a bound socket sends to ``prefixes`` (a note when not done)."""
    texts = [text for device in devices if (text := filter_batch(device, prefixes, initial))]
    if tools() is None or not texts:
        return missing_cause()
    failed = _run(held, timeout, [(["-batch", "-"], text) for text in texts], "tc")
    return f"the host's own addresses could not be filtered out of the sandbox's interface ({failed})" if failed else None


def _run(held: Held, timeout: float, batches: list[tuple[list[str], str]], program: str) -> str:
    """Run ``ip`` or ``tc`` batches in ``held``'s namespaces, at once; the first failure ("" when none)."""
    from kernel_ext.sandbox.supervisor import spawn

    found = tools()
    assert found is not None
    nsenter, ip, tc = found
    user, net = held.paths()
    enter = [nsenter, f"--user={user}", f"--net={net}", "--preserve-credentials", "--"]
    helpers = []
    for arguments, text in batches:
        helper = spawn([*enter, ip if program == "ip" else tc, *arguments], stdin=subprocess.PIPE,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(held.user, held.net))
        helpers.append((helper, text))
    failed = ""
    for helper, text in helpers:
        try:
            _, err = helper.communicate(text.encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.wait()
            failed = failed or "timed out"
            continue
        if helper.returncode != 0:
            failed = failed or err.decode(errors="replace").strip()[-200:] or f"exit {helper.returncode}"
    return failed
