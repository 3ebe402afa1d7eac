"""Path and link attacks on every file tool of the default catalog, through the real Executor.

Traversal, absolute paths, links to the outside (files and folders), links swapped in and out
while the tools run (a real racing thread, not a patched check), FIFOs and devices (no tool may
block on them), and hard links to outside files. Each case: a named refusal, no outside
content in any observation, and ``World.unchanged()``.
"""

from __future__ import annotations

import os
import random
import stat
import threading
import time
from pathlib import Path

import pytest

from kernel_ext.boundary import ToolResult

from .world import HOST_SECRET, World, call, file_executor

# tool -> arguments that target ``path`` (read_file first: replace_file_lines needs no real id to be refused)
TOOLS = {
    "read_file": lambda p: {"path": p},
    "list_files": lambda p: {"path": p},
    "search_in_files": lambda p: {"pattern": "SECRET|VALUE|inner", "path": p},
    "check_syntax": lambda p: {"path": p},
    "write_file": lambda p: {"path": p, "content": "planted = True\n"},
    "modify_file": lambda p: {"path": p, "old_text": "VALUE", "new_text": "PLANTED"},
    "replace_file_lines": lambda p: {"path": p, "read_id": "r0", "start_line": 1, "end_line": 1, "new_text": "planted"},
    "delete_file": lambda p: {"path": p},
}
ESCAPES = {"outside_workspace", "symlink_refused"}


OUTSIDE_NAMES = ("host_secret", "module.py", "inner", "'outside'")
LISTINGS = ("list_files", "search_in_files")


def refused(world: World, result: ToolResult, codes: set[str]) -> None:
    """A named refusal or, for a listing or a search, an answer showing nothing of the outside."""
    if result.ok and result.name in LISTINGS:
        shown = result.observation + str(result.data)
        assert not any(name in shown for name in OUTSIDE_NAMES), shown
        assert world.unchanged()
        return
    assert not result.ok, f"{result.name} succeeded: {result.observation}"
    assert result.error is not None and result.error.code in codes, (result.name, result.error)
    assert HOST_SECRET not in result.observation and HOST_SECRET not in str(result.data)
    assert world.unchanged(), f"{result.name} changed the disk outside the run"


def targets(world: World) -> dict[str, str]:
    """Each attack's path text, as a model would write it."""
    rel_secret = os.path.relpath(world.secret_file, world.ws)
    return {
        "dotdot": rel_secret,
        "dotdot_inside_first": f"sub/../{rel_secret}",
        "dotdot_folder": os.path.relpath(world.outside, world.ws),
        "absolute_secret": str(world.secret_file),
        "absolute_folder": str(world.outside),
        "other_run": str(world.run.other_ws / "secret.txt"),
        "proc_environ": "/proc/self/environ",
        "etc_passwd": "/etc/passwd",
    }


ATTACKS = ("dotdot", "dotdot_inside_first", "dotdot_folder", "absolute_secret", "absolute_folder", "other_run",
           "proc_environ", "etc_passwd")


@pytest.mark.parametrize("tool", list(TOOLS))
@pytest.mark.parametrize("attack", ATTACKS)
def test_traversal_and_absolute_paths_are_refused(world, tool, attack):
    result = call(file_executor(world.ws), tool, **TOOLS[tool](targets(world)[attack]))
    codes = {"outside_workspace"} | ({"unknown_read_id"} if tool == "replace_file_lines" else set())
    refused(world, result, codes)


@pytest.mark.parametrize("tool", list(TOOLS))
@pytest.mark.parametrize("link", ["file", "folder", "folder_member", "chain"])
def test_links_to_the_outside_are_never_followed(world, tool, link):
    (world.ws / "to_file").symlink_to(world.secret_file)
    (world.ws / "to_folder").symlink_to(world.outside)
    (world.ws / "hop").symlink_to("to_folder")  # a relative link to a link
    world.snapshot()
    path = {"file": "to_file", "folder": "to_folder", "folder_member": "to_folder/module.py", "chain": "hop/module.py"}[link]
    result = call(file_executor(world.ws), tool, **TOOLS[tool](path))
    codes = ESCAPES | ({"unknown_read_id"} if tool == "replace_file_lines" else set())
    if tool == "delete_file" and link in ("file", "folder"):
        codes |= {"not_regular_file"}  # the link itself is no regular file to delete
    refused(world, result, codes)
    assert (world.ws / "to_file").is_symlink() and (world.ws / "to_folder").is_symlink()


def _flip(stop: threading.Event, place: Path, link_target: Path, regular: bytes | None) -> None:
    """Swap ``place`` between the real thing and a link to the outside, atomically, until ``stop``."""
    tmp_link = place.with_name(place.name + ".swap-link")
    tmp_real = place.with_name(place.name + ".swap-real")
    while not stop.is_set():
        for _ in range(2):
            if tmp_link.is_symlink():
                tmp_link.unlink()
            tmp_link.symlink_to(link_target)
            os.replace(tmp_link, place) if regular is not None else _swap_dir(place, tmp_link)
            time.sleep(0.0002 * random.random())  # hold the link a moment: tools land on every state
            if regular is not None:
                tmp_real.write_bytes(regular)
                os.replace(tmp_real, place)
            else:
                _swap_back(place)


def _swap_dir(place: Path, link: Path) -> None:
    aside = place.with_name(place.name + ".aside")
    if place.is_dir() and not place.is_symlink():
        os.rename(place, aside)
    os.replace(link, place)


def _swap_back(place: Path) -> None:
    aside = place.with_name(place.name + ".aside")
    if aside.is_dir():
        if place.is_symlink():
            place.unlink()
        os.rename(aside, place)


@pytest.mark.parametrize("what", ["file", "folder"])
def test_links_swapped_in_while_tools_run_never_reach_the_outside(world, what):
    """A racing thread swaps a link in and out ~thousands of times while the tools read and write."""
    executor = file_executor(world.ws)
    if what == "file":
        place, link_target, regular = world.ws / "target.py", world.outside / "module.py", b"VALUE = 'inside'\n"
        place.write_bytes(regular)
        paths = ["target.py"]
    else:
        place, link_target, regular = world.ws / "pkg", world.outside, None
        place.mkdir()
        (place / "module.py").write_text("VALUE = 'inside'\n")
        paths = ["pkg/module.py"]
    stop = threading.Event()
    flip_errors: list[BaseException] = []

    def flip() -> None:  # the race must run to the end: a flipper that died would leave tools unraced
        try:
            _flip(stop, place, link_target, regular)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            flip_errors.append(exc)

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    outcomes = set()
    try:
        for i in range(150):
            for name in ("read_file", "modify_file", "check_syntax", "search_in_files"):
                args = TOOLS[name](paths[0])
                if name == "modify_file":  # matches inside and outside alike: a followed link would write out there
                    spaced = ("VALUE =", "VALUE  =") if i % 2 == 0 else ("VALUE  =", "VALUE =")
                    args = {"path": paths[0], "old_text": spaced[0], "new_text": spaced[1]}
                result = call(executor, name, **args)
                outcomes.add(result.error.code if result.error else "ok")
                assert HOST_SECRET not in result.observation and "'outside'" not in result.observation, result.observation
    finally:
        stop.set()
        flipper.join(10)
    assert not flipper.is_alive() and not flip_errors, flip_errors  # e.g. a refused edit made a folder at the place
    assert world.unchanged(), "a swapped-in link let a tool touch the outside"
    assert (world.outside / "module.py").read_text() == "VALUE = 'outside'\n"
    assert outcomes & {"symlink_refused", "stale_input", "not_found"}, outcomes  # the race really happened
    assert "ok" in outcomes, outcomes  # and the tools still worked between swaps


def _nonblocking(executor, name: str, **arguments) -> ToolResult:
    """Call in a thread; a tool that blocks on a FIFO or a device fails the test instead of hanging it."""
    box: list[ToolResult] = []
    worker = threading.Thread(target=lambda: box.append(call(executor, name, **arguments)), daemon=True)
    worker.start()
    worker.join(20)
    assert box, f"{name} blocked on a special file"
    return box[0]


@pytest.mark.parametrize("tool", ["read_file", "check_syntax", "write_file", "modify_file", "delete_file"])
def test_fifos_are_refused_without_blocking(world, tool):
    os.mkfifo(world.ws / "pipe.py")
    world.snapshot()
    result = _nonblocking(file_executor(world.ws), tool, **TOOLS[tool]("pipe.py"))
    refused(world, result, {"not_regular_file"})
    assert stat.S_ISFIFO(os.lstat(world.ws / "pipe.py").st_mode)


def test_search_and_listing_skip_fifos_and_devices_without_blocking(world):
    os.mkfifo(world.ws / "pipe.txt")
    (world.ws / "zero").symlink_to("/dev/zero")
    executor = file_executor(world.ws)
    found = _nonblocking(executor, "search_in_files", pattern="print")
    assert found.ok and found.data["total"] == 1, found.observation
    listed = _nonblocking(executor, "list_files", path=".")
    assert listed.ok and listed.data["skipped"].get("FIFOs, sockets and devices") == 1, listed.observation
    assert world.unchanged()


@pytest.mark.parametrize("tool", ["read_file", "check_syntax", "write_file", "modify_file"])
def test_device_nodes_are_refused(world, tool):
    try:
        os.mknod(world.ws / "zero.py", 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    except PermissionError:
        pytest.skip("this process may not create device nodes (no CAP_MKNOD)")
    world.snapshot()
    result = _nonblocking(file_executor(world.ws), tool, **TOOLS[tool]("zero.py"))
    refused(world, result, {"not_regular_file"})


def test_hard_links_to_outside_files_are_never_written_through(world):
    os.link(world.outside / "module.py", world.ws / "linked.py")
    world.snapshot()
    executor = file_executor(world.ws)
    read = call(executor, "read_file", path="linked.py")  # reading shows the shared file: same inode, by design
    assert read.ok
    for name, arguments in (
        ("write_file", {"path": "linked.py", "content": "planted = True\n"}),
        ("modify_file", {"path": "linked.py", "old_text": "VALUE", "new_text": "PLANTED"}),
        ("replace_file_lines", {"path": "linked.py", "read_id": read.data["read_id"], "start_line": 1, "end_line": 1,
                                "new_text": "PLANTED = 1"}),
    ):
        refused(world, call(executor, name, **arguments), {"hard_link_refused", "already_exists"})
    deleted = call(executor, "delete_file", path="linked.py")  # removes our name only; the outside file stays whole
    assert deleted.ok, deleted.observation
    assert not (world.ws / "linked.py").exists() and world.unchanged()
