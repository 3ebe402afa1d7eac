"""OS users for the hub test that runs each student as their own user (docs/jupyterhub_config.py,
``BESSER_HUB_SPAWNER=system``), and the search a student's kernel runs for keys it must not reach.

The users are real (``useradd``, as root), made with fresh names under a folder of their own, and
removed however the test ends: their processes (all started by this test's hub, since the users
are new) are ended by pid, then ``userdel -r``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path


def os_users_missing() -> str | None:
    """Why students cannot be OS users of their own here (None when they can)."""
    if os.getuid() != 0:
        return "separate OS users need root: useradd, and a hub that starts servers as other users"
    missing = [tool for tool in ("useradd", "userdel") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not on PATH (Debian's passwd package)"
    return None


def processes_of(uids: set[int]) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid in uids:
                    found.append(int(entry.name))
    return found


def remove_users(names: list[str]) -> list[str]:
    """End every process of these (test-made) users by pid, then delete them with their homes;
    what could not be removed, for the teardown to report."""
    uids = set()
    for name in names:
        with contextlib.suppress(KeyError):
            uids.add(pwd.getpwnam(name).pw_uid)
    for _ in range(3):  # a dying server may still start a child: look again
        for pid in processes_of(uids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    left = []
    for name in names:
        done = subprocess.run(["userdel", "--remove", "--force", name], capture_output=True, text=True)
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            left.append(f"{name}: {done.stderr.strip()}")
    return left


@contextlib.contextmanager
def os_users(count: int) -> Iterator[list[str]]:
    """``count`` new OS users with homes (0755: the hub makes them private) in a folder nobody lists."""
    base = Path(tempfile.mkdtemp(prefix="besser-hub-homes-"))
    base.chmod(0o711)  # students reach their homes, nobody lists them
    tag = secrets.token_hex(3)
    names = [f"bhub{tag}{chr(ord('a') + i)}" for i in range(count)]
    made: list[str] = []
    try:
        for name in names:
            subprocess.run(["useradd", "--create-home", "--home-dir", str(base / name), "--shell", "/bin/sh",
                            "--user-group", "--key", "HOME_MODE=0755", name], check=True, capture_output=True)
            made.append(name)
        yield names
    finally:
        left = remove_users(made)
        shutil.rmtree(base, ignore_errors=True)
        assert not left, f"test users left behind: {left}"


def needed_by_students() -> list[Path]:
    """What a student's server runs from: the interpreter's prefix, this venv, the checkout."""
    return [Path(p).resolve() for p in (sys.base_prefix, sys.prefix, Path(__file__).resolve().parent.parent)]


def hidden_ways(paths: list[Path]) -> dict[str, list[str]]:
    """For each folder other users cannot enter on the way to ``paths``: its children on those ways."""
    ways: dict[str, list[str]] = {}
    for path in paths:
        chain = [*reversed(path.parents), path]
        for parent, child in itertools.pairwise(chain):
            if not parent.stat().st_mode & stat.S_IXOTH:
                if str(child) not in ways.setdefault(str(parent), []):
                    ways[str(parent)].append(str(child))
                break
    return ways


# Run as root by unshare in a mount namespace of the hub's own: each private folder becomes an
# empty tmpfs (0711) with only the needed children bound back, then the hub's command runs.
EXPOSE = """
import json, os, subprocess, sys, tempfile
ways, command = json.loads(sys.argv[1]), sys.argv[2:]
for hidden, keep in ways.items():
    stage = tempfile.mkdtemp()
    parked = []
    for i, path in enumerate(keep):
        os.mkdir(f"{stage}/{i}")
        subprocess.run(["mount", "--bind", path, f"{stage}/{i}"], check=True)
        parked.append(f"{stage}/{i}")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0711", "besser-students-view", hidden], check=True)
    for place, path in zip(parked, keep):
        os.mkdir(path)
        subprocess.run(["mount", "--move", place, path], check=True)
os.execvp(command[0], command)
"""


def students_view(also: tuple[Path, ...] = ()) -> list[str]:
    """A command prefix under which students can run this environment's Python (empty when they
    already can). On a machine whose interpreter or checkout sits in a private folder (pyenv under
    /root, 0700), the hub runs in a mount namespace of its own where that folder is an empty
    tmpfs holding only what the servers run from: the hub's state lives elsewhere, so nothing of
    the hub's is exposed by it, and no other process on the machine sees the change. ``also``:
    what the hub's own services run from (LiteLLM's venv), kept reachable for them."""
    ways = hidden_ways([*needed_by_students(), *(p.resolve() for p in also if p.exists())])
    if not ways:
        return []
    return ["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-I", "-c", EXPOSE, json.dumps(ways)]


def run_as(name: str, view: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by this environment's Python as the OS user ``name`` (no groups), under ``view``."""
    account = pwd.getpwnam(name)
    return subprocess.run([*view, "setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups",
                           sys.executable, "-c", code], cwd="/", capture_output=True, text=True,
                          env={"PATH": os.defpath}, timeout=300)


def cannot_run_python(name: str, view: list[str]) -> str | None:
    """Why ``name`` cannot run this environment's Python and import the server under ``view``
    (None when it can)."""
    done = run_as(name, view, "import jupyterhub, kernel_ext")
    if done.returncode:
        return f"another OS user cannot run {sys.executable} with the project: {done.stderr.strip()[-300:]}"
    return None


# What a student's kernel runs: every readable /proc/*/environ and /proc/*/cmdline, and every
# readable regular file under ROOTS (no links followed, 16 MiB a file), searched for key-shaped
# text. The keys themselves never enter the student's kernel: the test compares what it reports.
PROBE = r'''
import json, os, re, stat
KEY = re.compile(rb"sk-[A-Za-z0-9_-]{8,}")
found, environs, denied, files = [], {}, [], 0

def tokens(where, data):
    found.extend([where, t] for t in sorted({m.group().decode() for m in KEY.finditer(data)}))

for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    try:
        uid = os.stat(f"/proc/{name}").st_uid
    except OSError:
        continue
    for part in ("environ", "cmdline"):
        try:
            with open(f"/proc/{name}/{part}", "rb") as handle:
                data = handle.read()
        except OSError:
            if part == "environ":
                environs[name] = {"uid": uid, "readable": False}
            continue
        if part == "environ":
            environs[name] = {"uid": uid, "readable": True}
        tokens(f"/proc/{name}/{part}", data)

for root in ROOTS:
    for top, _, names in os.walk(root, onerror=lambda error: denied.append(error.filename)):
        for leaf in names:
            path = os.path.join(top, leaf)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    files += 1
                    tokens(path, os.read(fd, 16 << 20))
            finally:
                os.close(fd)

print(json.dumps({"uid": os.getuid(), "environs": environs, "found": found, "denied": denied, "files": files}))
'''


def probe_code(roots: list[str]) -> str:
    """The search, with its folders as a JSON literal (data, never code text)."""
    return f"import json\nROOTS = json.loads({json.dumps(roots)!r})\n{PROBE}"
