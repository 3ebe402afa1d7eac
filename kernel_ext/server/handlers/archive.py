"""``GET runs/{id}/archive``: the run's folder as a zip (``server/archive.py`` writes it).

The zip is built in a worker thread (never on the event loop: it reads the whole tree) into a
spooled temporary file, then streamed.
"""

from __future__ import annotations

import asyncio
import tempfile

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from kernel_ext.server.archive import EXCLUDED_NAMES, is_internal, write_archive
from kernel_ext.server.handlers.base import BesserHandler

__all__ = ["EXCLUDED_NAMES", "ArchiveHandler", "is_internal", "write_archive"]
CHUNK = 64 * 1024


class ArchiveHandler(BesserHandler):
    auth_resource = "besser-agent:archive"

    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        run = await self.find_run(run_id)
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
