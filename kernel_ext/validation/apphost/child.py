"""Inside the sandbox: one forked child of the app host: a fresh copy of the app, a fresh SQLite file, one job.

The child copies the staged source into its own folder, points ``DATABASE_URL`` at a new
SQLite file there, imports the app's entry module (FastAPI, SQLAlchemy and pydantic are
already in memory from the host), then waits for its job on a pipe: a scenario (``exchange``)
or the validation probe (``probe``). It writes one result frame and exits; nothing it did
survives it. The app's stdout and stderr go to a log file whose tail joins the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import shutil
import sys
import time
from typing import Any

from kernel_ext.sandbox.frames import as_object, read_frame, text, write_frame
from kernel_ext.validation.apphost.lifespan import describe_exception, format_traceback

LOG_TAIL_CHARS = 4000


class Booted:
    """What importing the app gave: the ASGI app or the failure."""

    def __init__(self) -> None:
        self.app: Any = None
        self.module: Any = None
        self.error: str | None = None
        self.traceback: str = ""
        self.copy_ms = 0.0
        self.import_ms = 0.0
        self.mapper_error: str | None = None


def prepare(src: str, entry: str, attr: str, workdir: str) -> tuple[Booted, str]:
    """Copy ``src`` into ``workdir/app``, point the database at ``workdir``, import ``entry``."""
    booted = Booted()
    started = time.perf_counter()
    app_dir = os.path.join(workdir, "app")
    shutil.copytree(src, app_dir, ignore=shutil.ignore_patterns("__pycache__"))
    booted.copy_ms = (time.perf_counter() - started) * 1000
    os.environ["DATABASE_URL"] = f"sqlite:///{os.path.join(workdir, 'app.db')}"
    os.chdir(app_dir)
    sys.path.insert(0, app_dir)
    _forget_shadowed(app_dir)
    importlib.invalidate_caches()
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)  # the probe's own client, not the app
    started = time.perf_counter()
    try:
        booted.module = importlib.import_module(entry)
        booted.app = find_app(booted.module, attr)
        if booted.app is None:
            booted.error = f"{entry}.py defines no ASGI app (no {attr!r} object, no FastAPI/Starlette instance)"
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import is a start-up failure too
        booted.error = describe_exception(exc, app_dir)
        booted.traceback = format_traceback(exc, app_dir)
    if booted.error is None:
        booted.mapper_error = settle(booted.app, app_dir)
    booted.import_ms = (time.perf_counter() - started) * 1000
    return booted, app_dir


def settle(app: Any, app_dir: str) -> str | None:
    """Do the app's lazy first-request work now, without a request: ORM mappers, route tables.

    Configuring SQLAlchemy's mappers is what the first query would do (its failure is returned:
    a broken relationship is a start-up failure). Matching a path no route has makes routers
    that build their routes lazily build them. Neither touches the database or middleware.
    """
    error = None
    orm = sys.modules.get("sqlalchemy.orm")
    if orm is not None:
        try:
            orm.configure_mappers()
        except Exception as exc:  # noqa: BLE001 - reported as a finding
            error = describe_exception(exc, app_dir)
    router = getattr(app, "router", None)
    scope = {"type": "http", "method": "GET", "path": "/__besser_settle__", "root_path": "", "headers": [],
             "query_string": b"", "app": app}
    for route in getattr(router, "routes", ()) or ():
        try:
            route.matches(dict(scope))
        except Exception:  # noqa: BLE001, S112 - best effort only
            continue
    _endpoint_sources(getattr(router, "routes", ()) or ())
    return error


def _endpoint_sources(routes: Any, depth: int = 0) -> None:
    """FastAPI reads each endpoint's source location on its first request; read them now."""
    extract = getattr(sys.modules.get("fastapi.routing"), "_extract_endpoint_context", None)
    if extract is None or depth > 8:
        return
    for route in routes:
        endpoint = getattr(route, "endpoint", None)
        if callable(endpoint):
            with contextlib.suppress(Exception):  # best effort only
                extract(endpoint)
        inner = getattr(getattr(route, "original_router", None), "routes", None) or getattr(route, "routes", None)
        if inner:
            _endpoint_sources(inner, depth + 1)


def find_app(module: Any, attr: str) -> Any:
    candidate = getattr(module, attr, None)
    if candidate is not None and callable(candidate):
        return candidate
    try:
        from starlette.applications import Starlette
    except ImportError:  # pragma: no cover - the host imports starlette
        return None
    for value in vars(module).values():
        if isinstance(value, Starlette):
            return value
    return None


def _forget_shadowed(app_dir: str) -> None:
    """Drop host-imported third-party modules the app's own top-level modules would shadow."""
    for name in os.listdir(app_dir):
        stem = name.removesuffix(".py")
        if stem in sys.modules and stem not in sys.stdlib_module_names and stem not in ("kernel_ext",):
            for loaded in [m for m in sys.modules if m == stem or m.startswith(stem + ".")]:
                del sys.modules[loaded]


def run_job(booted: Booted, app_dir: str, job: dict[str, Any], secrets: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"kind": job.get("kind")}
    if booted.error is None:
        if job.get("kind") == "probe":
            from kernel_ext.validation.apphost.probe import run_probe

            result.update(asyncio.run(run_probe(booted.app, job, app_dir, secrets)))
        else:
            from kernel_ext.validation.apphost.exchange import run_requests

            result.update(asyncio.run(run_requests(booted.app, job.get("requests") or [], app_dir, secrets)))
    result["log_tail"] = secrets.scrub_text(log_tail(os.path.join(os.path.dirname(app_dir), "app.log")))
    return result


def log_tail(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL_CHARS))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return text if size <= LOG_TAIL_CHARS else "..." + text


def main(src: str, entry: str, attr: str, workdir: str, job_fd: int, result_fd: int) -> None:
    """The child's whole life (called right after ``fork``; never returns)."""
    code = 0
    try:
        log = os.open(os.path.join(workdir, "app.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        booted, app_dir = prepare(src, entry, attr, workdir)
        notice = read_frame(job_fd)
        if notice is None:
            os._exit(0)
        with open(text(as_object(notice)["job_file"]), encoding="utf-8") as handle:
            job = json.load(handle)
        from kernel_ext.validation.apphost.exchange import Secrets

        secrets = Secrets()
        started = time.perf_counter()
        result = run_job(booted, app_dir, job, secrets)
        result["boot"] = {"ok": booted.error is None, "error": secrets.scrub_text(booted.error or "") or None,
                          "mapper_error": booted.mapper_error,
                          "traceback": secrets.scrub_text(booted.traceback),
                          "copy_ms": round(booted.copy_ms, 2), "import_ms": round(booted.import_ms, 2)}
        result["job_ms"] = round((time.perf_counter() - started) * 1000, 2)
        write_frame(result_fd, result)
    except BaseException as exc:  # noqa: BLE001 - report whatever happened, then leave
        code = 1
        with contextlib.suppress(OSError):
            write_frame(result_fd, {"internal_error": describe_exception(exc)})
    finally:
        os._exit(code)
