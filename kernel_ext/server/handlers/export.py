"""``GET runs/{id}/export``: a finished run as a notebook (``hosting/export``), as JSON.

Built in a child process (``export/apart``: reading a run's up to 64 MiB of turns, cutting and
checking each cell are long calls that hold the GIL, so a worker thread would still stall the loop),
with the server's own known secrets cut, since the server holds the keys a kernel may not know;
sent a chunk at a time.
The magic writes the answer to a file; a refusal is named (404 ``RUN_NOT_FOUND``, 409
``RUN_NOT_FINISHED`` / ``NOT_EXPORTABLE``).
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from kernel_ext.server.handlers.base import BesserHandler, Refusal

STATUS = {"RUN_NOT_FOUND": 404, "RUN_NOT_FINISHED": 409, "NOT_EXPORTABLE": 409, "CODE_NOT_BUILT": 409}


class ExportHandler(BesserHandler):
    auth_resource = "besser-agent:runs"

    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        from kernel_ext.hosting.export import ExportRefused
        from kernel_ext.hosting.export.apart import notebook_chunks

        run = await self.find_run(run_id)
        try:
            chunks = await notebook_chunks(run.context.layout.run_dir, self.state.manager.known_secrets)
        except ExportRefused as exc:
            raise Refusal(STATUS.get(exc.code, 409), exc.code, exc.message) from None
        self.set_header("Content-Type", "application/x-ipynb+json")
        self.set_header("Content-Disposition", f'attachment; filename="{run.id}.ipynb"')
        try:
            for chunk in chunks:  # written a chunk at a time: one 70 MB body would be copied and hashed (ETag) on the loop
                self.write(chunk)
                await self.flush()
        except StreamClosedError:
            return
        self.finish()
