"""Inside the sandbox: the warm import checker program (started by module name, never imported by the host).

It imports the heavy libraries a generated ORM or schema module needs once (SQLAlchemy,
pydantic), then answers requests on stdin: for each, it forks, and the child executes the
proposed module source as if imported from its directory. The fork starts with everything
already imported, so a check costs the module's own execution, not the library imports.

Frames are the sandbox's one framing (``kernel_ext.sandbox.frames``, standard library only),
both ways. Request: ``source``, ``filename``, ``timeout``. Reply: ``ok``, ``error`` (the
exception, one line, plus the failing line of the module when known), ``timed_out``. The
child's stdin/stdout/stderr point at /dev/null, it writes bytecode nowhere, runs in its own
session and is killed with its group on timeout.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import linecache
import os
import resource
import select
import signal
import sys
import time
import traceback
import types

from kernel_ext.sandbox.frames import JSONValue, as_object, number, read_frame, text, write_frame  # standard library only


def _module_name(filename: str) -> tuple[str, str]:
    """(dotted module name, directory to put on sys.path): packages are walked upward."""
    directory, base = os.path.split(filename)
    parts = [os.path.splitext(base)[0]]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        parts.insert(0, package)
    return ".".join(parts), directory


def _child(source: str, filename: str, report_fd: int, timeout: float) -> None:
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    cpu = int(timeout) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    result = {"ok": True, "error": ""}
    try:
        name, top = _module_name(filename)
        sys.path.insert(0, top)
        os.chdir(os.path.dirname(filename))
        module = types.ModuleType(name)
        module.__file__ = filename
        if "." in name:
            module.__package__ = name.rpartition(".")[0]
        sys.modules[name] = module
        # Tracebacks must quote the proposed source, not the version still on disk.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)  # noqa: S102 - in the sandbox: running the module is the check
    except BaseException as exc:  # noqa: BLE001 - every failure of the module is the answer
        line = ""
        for frame in traceback.extract_tb(exc.__traceback__):
            if frame.filename == filename:
                line = f" (line {frame.lineno}: {(frame.line or '').strip()[:120]})"
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
        result = {"ok": False, "error": f"{message}{line}"}
    os.write(report_fd, json.dumps(result).encode("utf-8"))
    os._exit(0)


def _check(request: dict[str, JSONValue]) -> dict[str, JSONValue]:
    timeout = number(request.get("timeout", 10.0))
    source, filename = text(request["source"]), text(request["filename"])
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(source, filename, write_fd, timeout)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        for kill in (os.killpg, os.kill):  # the group: the module may have left processes behind
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"ok": False, "timed_out": True, "error": f"importing did not finish within {timeout:g} s"}
    if not chunks:
        code = os.waitstatus_to_exitcode(status)
        return {"ok": False, "timed_out": False, "error": f"the import process died (exit {code}) before reporting"}
    reply = json.loads(b"".join(chunks).decode("utf-8"))
    reply["timed_out"] = False
    return reply


def main(preload: list[str]) -> int:
    sys.dont_write_bytecode = True
    loaded = []
    for name in preload:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception:  # noqa: BLE001, S110 - a missing library is reported by the checked module itself
            pass
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    write_frame(stdout, {"ready": True, "preloaded": loaded, "pid": os.getpid()})
    while True:
        request = read_frame(stdin)
        if request is None:
            return 0
        try:
            reply = _check(as_object(request))
        except Exception as exc:  # noqa: BLE001 - keep serving; the host sees the failure
            reply = {"ok": False, "timed_out": False, "error": f"checker error: {exc}"}
        write_frame(stdout, reply)
