"""Inside the sandbox (the child): one scenario against one app: references, cookies, timing, checks.

Requests share state: the database, the cookies responses set (kept by the client for the
rest of the scenario) and the responses later requests refer to. Everything is in-process
(ASGI transport): no socket is opened. Credentials are learned while the scenario runs
(credential-bearing header values, secret-named fields, cookie values) and removed from the
whole result at the end, so an app that echoes a token anywhere does not leak it.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from kernel_ext import safejson
from kernel_ext.secrets import is_secret_field, is_secret_name, redact, redact_text
from kernel_ext.validation.apphost.lifespan import ErrorRecorder, Lifespan
from kernel_ext.validation.assertions import field_checks, status_check
from kernel_ext.validation.references import MISSING, ReferenceFailure, Responses, resolve_string, resolve_value

BASE_URL = "https://testserver"
REQUEST_TIMEOUT_S = 30.0
BODY_KEEP = 1 << 20  # bytes of a response parsed for references and checks
BODY_CHARS = 4000  # characters of a body shown in the report
MAX_REDIRECTS = 5


class Secrets:
    """Credential values seen during the scenario (never sent back as such)."""

    def __init__(self) -> None:
        self.values: set[str] = set()

    def add(self, value: Any) -> None:
        if isinstance(value, str) and value.strip():
            self.values.add(value)
            scheme, _, credential = value.partition(" ")
            if credential.strip() and scheme.isalpha():
                self.values.add(credential.strip())

    def header(self, name: str, value: str) -> None:
        if is_secret_name(name):
            self.add(value)

    def fields(self, value: Any) -> None:
        """Secret-named string fields anywhere in a JSON value."""
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, str) and isinstance(key, str) and is_secret_field(key, item):
                    self.add(item)
                else:
                    self.fields(item)
        elif isinstance(value, list):
            for item in value:
                self.fields(item)

    def query(self, path: str) -> None:
        for key, item in parse_qsl(urlsplit(path).query, keep_blank_values=False):
            if is_secret_name(key):
                self.add(item)

    def scrub(self, value: Any) -> Any:
        return redact(value, self.values)

    def scrub_text(self, text: str) -> str:
        return redact_text(text, self.values)


def preview(message: dict[str, Any]) -> None:
    """Cut a (redacted) body to what the report shows: the JSON value when short, else text with counts.

    Runs after redaction, so a cut can never leave half a credential behind.
    """
    body = message.get("body")
    if body is None:
        return
    text = body if message.pop("is_text", False) else json.dumps(body, ensure_ascii=False)
    message["body_chars"] = len(text)
    message["truncated"] = len(text) > BODY_CHARS
    if message["truncated"]:
        message["body"] = text[:BODY_CHARS]


def finish_rows(rows: list[dict[str, Any]], secrets: Secrets) -> list[dict[str, Any]]:
    """Redact every row with what the scenario taught, then cut the bodies."""
    scrubbed = secrets.scrub(rows)
    for row in scrubbed:
        for side in ("request", "response"):
            preview(row.get(side) or {})
    return scrubbed


def parse_body(content: bytes, content_type: str) -> tuple[Any, str]:
    text = content[:BODY_KEEP].decode("utf-8", "replace")
    if not text.strip():
        return MISSING, text
    if "json" in content_type or text.lstrip()[:1] in "{[":
        try:
            return safejson.loads(text), text
        except ValueError:
            pass
    return MISSING, text


async def run_requests(app: Any, requests: list[dict[str, Any]], app_dir: str = "",
                       secrets: Secrets | None = None) -> dict[str, Any]:
    """Run the scenario's requests (after the app's start-up); the result is already redacted."""
    import httpx

    recorder = ErrorRecorder(app, app_dir)
    secrets = secrets if secrets is not None else Secrets()
    results: list[dict[str, Any]] = []
    responses = Responses()
    started = time.perf_counter()
    async with Lifespan(app) as lifespan:
        startup_ms = (time.perf_counter() - started) * 1000
        if lifespan.error is None:
            transport = httpx.ASGITransport(app=recorder, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, follow_redirects=True,
                                         max_redirects=MAX_REDIRECTS, timeout=REQUEST_TIMEOUT_S,
                                         trust_env=False) as client:
                for index, spec in enumerate(requests):
                    results.append(await one_request(client, recorder, spec, index, responses, secrets))
                    for cookie in client.cookies.jar:  # session cookies are credentials too
                        secrets.add(cookie.value)
    outcome = {
        "lifespan": {"ok": lifespan.error is None, "error": lifespan.error, "supported": lifespan.supported,
                     "startup_ms": round(startup_ms, 2)},
        "requests_ms": round((time.perf_counter() - started) * 1000 - startup_ms, 2),
    }
    scrubbed = secrets.scrub(outcome)
    scrubbed["requests"] = finish_rows(results, secrets)
    scrubbed["secret_values"] = len(secrets.values)
    return scrubbed


async def one_request(client: Any, recorder: ErrorRecorder, spec: dict[str, Any], index: int,
                      responses: Responses, secrets: Secrets) -> dict[str, Any]:
    method = str(spec["method"]).upper()
    row: dict[str, Any] = {"index": index, "method": method, "path": spec["path"], "status": None,
                           "expected_status": spec.get("expected_status"), "assertions": [], "duration_ms": 0.0,
                           "request": {"headers": {}, "body": None}, "response": {"headers": {}, "body": None},
                           "error": None, "passed": False}
    try:
        path = resolve_string(spec["path"], responses, index, in_path=True)
        headers = {name: resolve_string(str(value), responses, index) for name, value in (spec.get("headers") or {}).items()}
        body = resolve_value(spec.get("json"), responses, index) if spec.get("has_json") else MISSING
    except ReferenceFailure as exc:
        row["error"] = f"reference: {exc}"
        responses.add(MISSING, f"request {index} was not sent: {exc}")
        return row
    for name, value in headers.items():
        secrets.header(name, value)
    secrets.query(path)
    if body is not MISSING:
        secrets.fields(body)
    row["path"] = path
    row["request"] = {"headers": headers, "body": None if body is MISSING else body}
    bad = [n for n, v in headers.items() if any(c in v for c in "\r\n\x00")]
    if bad or not path.startswith("/") or path.startswith("//"):
        what = f"header {bad[0]} holds a line break" if bad else f"path {path!r}"
        row["error"] = f"refused after resolving references: {what}"
        responses.add(MISSING, f"request {index} was refused")
        return row
    kwargs: dict[str, Any] = {"headers": headers}
    if body is not MISSING:
        kwargs["json"] = body
    sent = time.perf_counter()
    try:
        response = await asyncio.wait_for(client.request(method, path, **kwargs), REQUEST_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the app's (or transport's) failure is data
        row["duration_ms"] = round((time.perf_counter() - sent) * 1000, 2)
        row["error"] = recorder.take() or f"{type(exc).__name__}: {exc}"
        responses.add(MISSING, f"request {index} failed: {row['error']}")
        return row
    row["duration_ms"] = round((time.perf_counter() - sent) * 1000, 2)
    row["status"] = response.status_code
    crashed = recorder.take()
    if crashed:
        row["error"] = f"unhandled exception: {crashed}"
    content = response.content
    value, text = parse_body(content, response.headers.get("content-type", ""))
    if value is not MISSING:
        secrets.fields(value)
    response_headers = {k: v for k, v in response.headers.items()}
    if response.history:
        row["redirected_from"] = [str(r.url.raw_path.decode("ascii", "replace")) for r in response.history]
    row["response"] = {"headers": response_headers, "body": text if value is MISSING else value, "is_text": value is MISSING,
                       "body_bytes": len(content)}
    if value is MISSING and not text:
        row["response"]["body"] = None
    responses.add(value, "" if value is not MISSING else f"status {response.status_code}, body is not JSON")
    checks = []
    status_result = status_check(spec.get("expected_status"), response.status_code)
    if status_result:
        checks.append(status_result)
    checks += field_checks(spec.get("expected_fields"), value, responses, index)
    row["assertions"] = checks
    # Without an expected status, a server error (5xx) fails the request.
    row["passed"] = all(c["ok"] for c in checks) and (status_result is not None or response.status_code < 500)
    return row
