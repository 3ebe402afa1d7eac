"""REST + SSE handlers under ``<base_url>/besser-agent/``; the route table lives here."""

from __future__ import annotations

from kernel_ext.server.auth import API_PREFIX

RUN = r"(?P<run_id>[A-Za-z0-9][A-Za-z0-9_-]{2,63})"
# Any one path segment: every host-minted id (``c1``, ``cli-1``...) and anything else, which the
# handler answers by name (404 NO_SUCH_APPROVAL) instead of the router's bare 404.
CALL = r"(?P<call_id>[^/]{1,256})"


def routes() -> list[tuple[str, type]]:
    """(pattern, handler) pairs, relative to the server's base URL."""
    from kernel_ext.server.handlers.archive import ArchiveHandler
    from kernel_ext.server.handlers.base import UnknownRouteHandler
    from kernel_ext.server.handlers.config import ConfigHandler
    from kernel_ext.server.handlers.decisions import ApprovalHandler, CancelHandler
    from kernel_ext.server.handlers.events import EventsHandler
    from kernel_ext.server.handlers.export import ExportHandler
    from kernel_ext.server.handlers.runs import RunHandler, RunsHandler
    from kernel_ext.server.handlers.status import StatusHandler

    prefix = API_PREFIX
    return [
        (rf"{prefix}/?", StatusHandler),  # a page for a person (the run view's "hosted by" line links here)
        (rf"{prefix}/config", ConfigHandler),
        (rf"{prefix}/runs", RunsHandler),
        (rf"{prefix}/runs/{RUN}", RunHandler),
        (rf"{prefix}/runs/{RUN}/events", EventsHandler),
        (rf"{prefix}/runs/{RUN}/approvals/{CALL}", ApprovalHandler),
        (rf"{prefix}/runs/{RUN}/cancel", CancelHandler),
        (rf"{prefix}/runs/{RUN}/archive", ArchiveHandler),
        (rf"{prefix}/runs/{RUN}/export", ExportHandler),
        (rf"{prefix}(?:/.*)?", UnknownRouteHandler),  # last: its body is capped like every other route's
    ]
