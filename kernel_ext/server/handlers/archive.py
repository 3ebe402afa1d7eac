"""``GET runs/{id}/archive``: the run's folder as a zip, without its internal folders.

The zip holds ``app/`` (the generated project), ``events.jsonl`` and ``run.json``, under a
``<run-id>/`` prefix. Left out: ``.besser/`` (sandbox home, snapshots, state), F3's
``.besser_command_output/``, caches and dependency trees, and anything that is not a regular
file (symbolic links are never followed, so a link in the workspace cannot pull in a host
file). The zip is built in a worker thread into a spooled temporary file, then streamed.
"""

from __future__ import annotations

import asyncio
import os
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import IO

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from kernel_ext.server.handlers.base import BesserHandler
from kernel_ext.workspace.publish import is_temp_name

EXCLUDED_NAMES = frozenset({".besser", ".besser_command_output", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules", ".venv"})
CHUNK = 64 * 1024


def is_internal(name: str) -> bool:
    return name in EXCLUDED_NAMES or name.startswith(".besser") or is_temp_name(name)


def write_archive(run_dir: Path, out: IO[bytes]) -> int:
    """Write the zip of ``run_dir`` to ``out``; the number of files it holds."""
    count = 0
    prefix = run_dir.name
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for folder, dirs, files in os.walk(run_dir, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not is_internal(d) and not os.path.islink(os.path.join(folder, d)))
            for name in sorted(files):
                if is_internal(name):
                    continue
                path = os.path.join(folder, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if not stat.S_ISREG(info.st_mode):
                    continue
                relative = os.path.relpath(path, run_dir)
                archive.write(path, arcname=f"{prefix}/{relative}")
                count += 1
    return count


class ArchiveHandler(BesserHandler):
    auth_resource = "besser-agent:archive"

    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        run = self.find_run(run_id)
        run_dir = run.context.layout.run_dir
        with tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024) as spool:
            await asyncio.to_thread(write_archive, run_dir, spool)
            spool.seek(0)
            self.set_header("Content-Type", "application/zip")
            self.set_header("Content-Disposition", f'attachment; filename="{run.id}.zip"')
            try:
                while chunk := spool.read(CHUNK):
                    self.write(chunk)
                    await self.flush()
            except StreamClosedError:
                return
        self.finish(set_content_type="application/zip")
