"""The export in a process of its own, for the server: none of it runs on the loop or holds its GIL.

Building an export is long calls into C (reading up to 64 MiB of recorded turns, JSON, the secret
matcher, the parser that checks each runnable cell, nbformat's JSON), each holding the GIL from
start to end; in a worker thread they still stopped the server's loop while they ran (7 MiB of
turns stalled ``GET config`` 0.2-0.3 s, 51 MiB 1.4-2.9 s). A child process builds the notebook;
the loop only reads its pipe, a bounded chunk at a time. The known secrets reach the child on its
stdin, never its command line (which any local user can read). A refusal comes back named.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from kernel_ext.hosting.export.record import MAX_SIDE_FILE_BYTES, ExportRefused

EXPORT_TIMEOUT_S = 600.0  # a 50 MiB run exports in well under a minute; a stuck child is ended
MAX_NOTEBOOK_BYTES = 4 * MAX_SIDE_FILE_BYTES  # the turns, escaped twice (a literal, then notebook JSON), and the rest
CHUNK = 256 * 1024
_ROOT = str(Path(__file__).resolve().parents[3])  # the folder holding kernel_ext, for the child's import
_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from kernel_ext.hosting.export.apart import main; sys.exit(main())"


async def notebook_chunks(run_dir: Path, known: Iterable[str], *, timeout: float = EXPORT_TIMEOUT_S) -> list[bytes]:
    """The export of ``run_dir`` as notebook JSON (UTF-8), built by a child process, in the chunks it
    was read in (never joined on the loop: the caller writes them one by one)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, _ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=_child_environment())
    try:
        async with asyncio.timeout(timeout):
            return await _collect(process, json.dumps({"run_dir": str(run_dir), "known": list(known)}).encode())
    except TimeoutError:
        raise ExportRefused("NOT_EXPORTABLE", f"the export did not finish within {timeout:.0f} s") from None
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _child_environment() -> dict[str, str]:
    """The sandbox's one environment scrub: the child is handed the keys it must cut on stdin and
    needs none of the server's own (an export never holds a key it was not asked to find)."""
    from kernel_ext.sandbox import scrub_environment

    return scrub_environment(home=os.environ.get("HOME", "/"), tmpdir=tempfile.gettempdir()).env


async def _collect(process: asyncio.subprocess.Process, order: bytes) -> list[bytes]:
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    process.stdin.write(order)
    await process.stdin.drain()
    process.stdin.close()
    errors = asyncio.ensure_future(_tail(process.stderr))  # read beside stdout: a full pipe never stalls the child
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := await process.stdout.read(CHUNK):
            size += len(chunk)
            if size > MAX_NOTEBOOK_BYTES:
                raise ExportRefused("NOT_EXPORTABLE", f"the notebook would be over {MAX_NOTEBOOK_BYTES // 2**20} MiB")
            chunks.append(chunk)
        status = await process.wait()
        said = (await errors).decode("utf-8", "replace")
    finally:
        errors.cancel()
    if status == 0:
        return chunks
    try:
        refusal = json.loads(said.strip().splitlines()[-1])
        raise ExportRefused(str(refusal["code"]), str(refusal["message"]))
    except (ValueError, IndexError, KeyError, TypeError):
        raise ExportRefused("NOT_EXPORTABLE", f"the export process failed (exit status {status})") from None


async def _tail(stream: asyncio.StreamReader, keep: int = 64 * 1024) -> bytes:
    """What ``stream`` said, its last ``keep`` bytes (a refusal is its last line)."""
    said = b""
    while chunk := await stream.read(CHUNK):
        said = (said + chunk)[-keep:]
    return said


def main() -> int:
    """The child: the order on stdin, the notebook on stdout, a refusal as one JSON line on stderr."""
    from kernel_ext.hosting.export.notebook import notebook_text

    order = json.loads(sys.stdin.buffer.read(MAX_SIDE_FILE_BYTES))
    try:
        text = notebook_text(order["run_dir"], tuple(order["known"]))
    except ExportRefused as exc:
        print(json.dumps({"code": exc.code, "message": exc.message}), file=sys.stderr)
        return 2
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()
    return 0
