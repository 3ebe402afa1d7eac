"""A scenario's definition: up to 20 declarative requests, and the rules they must obey.

No shell commands and no external URLs: a path is an absolute path of the app under test
(``/books/{{0.id}}``), never a URL. Headers are the API's own: Authorization, Accept,
Content-Type, Accept-Language, If-Match, If-None-Match, Idempotency-Key and ``X-*``; the
transport's and the proxy's headers (Host, Cookie, framing, hop-by-hop, ``X-Forwarded-*``,
method overrides) are refused by name, because the sandbox owns them (cookies come from the
app's own responses, kept for the rest of the scenario). Credential values are kept to
replay the scenario but never shown (``redacted``).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.secrets import REDACTED, is_secret_name, redact

MAX_REQUESTS = 20
MAX_HEADERS = 10
MAX_INPUT_BYTES = 64 * 1024
MAX_HEADER_VALUE = 8192
MAX_PATH = 2048
# Origin and the preflight's two headers: a plain request header to the sandboxed app, which only
# echoes what its CORS settings allow; a scenario can then test CORS as a browser would ask.
ALLOWED_HEADERS = frozenset({"authorization", "accept", "content-type", "accept-language", "if-match", "if-none-match",
                             "idempotency-key", "origin", "access-control-request-method", "access-control-request-headers"})
REFUSED_HEADERS = {
    "host": "the in-process transport sets Host",
    "cookie": "cookies come from the app's own responses and are kept for the rest of the scenario",
    "content-length": "framing is the transport's",
    "transfer-encoding": "framing is the transport's",
    "connection": "a hop-by-hop header",
    "keep-alive": "a hop-by-hop header",
    "proxy-connection": "a hop-by-hop header",
    "te": "a hop-by-hop header",
    "trailer": "a hop-by-hop header",
    "upgrade": "a hop-by-hop header",
    "proxy-authorization": "a hop-by-hop header",
    "proxy-authenticate": "a hop-by-hop header",
    "forwarded": "proxy headers would let a scenario impersonate a client or a scheme",
    "x-real-ip": "proxy headers would let a scenario impersonate a client or a scheme",
    "x-http-method-override": "method overrides would hide the real method",
    "x-http-method": "method overrides would hide the real method",
    "x-method-override": "method overrides would hide the real method",
    "x-original-url": "URL rewrites would hide the real path",
    "x-rewrite-url": "URL rewrites would hide the real path",
}
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class RequestSpec(BaseModel):
    """One request: ``{method, path, json?, headers?, expected_status?, expected_fields?}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    path: str = Field(min_length=1, max_length=MAX_PATH, description="absolute path of the app, e.g. /books/{{0.book.id}}/")
    json_body: Any = Field(default=None, alias="json", description="JSON body; {{N.field}} references allowed")
    headers: dict[str, str] | None = Field(default=None, description="API headers only; {{N.field}} allowed in values")
    expected_status: int | list[int] | None = Field(default=None, description="status, or list of acceptable statuses")
    expected_fields: dict[str, Any] | None = Field(default=None, description="dotted path -> expected JSON value")

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    def has_json(self) -> bool:
        return "json_body" in self.model_fields_set

    def wire(self) -> dict[str, Any]:
        """The request as the sandboxed child reads it."""
        return {"method": self.method, "path": self.path, "json": self.json_body, "has_json": self.has_json(),
                "headers": dict(self.headers or {}), "expected_status": self.expected_status,
                "expected_fields": dict(self.expected_fields) if self.expected_fields is not None else None}

    def shown(self, known: tuple[str, ...] = ()) -> dict[str, Any]:
        """The request as a person or the model may see it: credential values redacted."""
        data = self.wire()
        data.pop("has_json")
        if not self.has_json():
            data.pop("json")
        data["headers"] = {k: (REDACTED if is_secret_name(k) and v else v) for k, v in data["headers"].items()}
        return redact(data, known)


def check_header(name: str, value: str) -> None:
    lower = name.strip().lower()
    if not _TOKEN.match(name):
        raise ToolFailure(ErrorCode.HEADER_REFUSED, f"header name {name!r} is not a valid HTTP header name", {"header": name})
    if lower in REFUSED_HEADERS:
        raise ToolFailure(ErrorCode.HEADER_REFUSED, f"header {name!r} is refused: {REFUSED_HEADERS[lower]}", {"header": name})
    if lower.startswith("x-forwarded-"):
        raise ToolFailure(ErrorCode.HEADER_REFUSED, f"header {name!r} is refused: proxy headers would let a scenario "
                                                    "impersonate a client or a scheme", {"header": name})
    if lower not in ALLOWED_HEADERS and not lower.startswith("x-"):
        raise ToolFailure(ErrorCode.HEADER_REFUSED,
                          f"header {name!r} is not allowed: use Authorization, Accept, Content-Type, "
                          "Accept-Language, If-Match, If-None-Match, Idempotency-Key, Origin, "
                          "Access-Control-Request-Method/-Headers or X-* API headers",
                          {"header": name})
    if any(c in value for c in "\r\n\x00") or len(value) > MAX_HEADER_VALUE:
        raise ToolFailure(ErrorCode.HEADER_REFUSED,
                          f"header {name!r} has a line break, a NUL or more than {MAX_HEADER_VALUE} characters",
                          {"header": name})


def check_path(path: str, index: int) -> None:
    if _SCHEME.match(path) or path.startswith("//") or "://" in path.split("?", 1)[0]:
        raise ToolFailure(ErrorCode.EXTERNAL_URL, f"request {index}: {path[:80]!r} is a URL; test_api only calls the app under "
                                                  "test: give an absolute path such as /books/")
    if not path.startswith("/"):
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"request {index}: the path must start with '/' (got {path[:80]!r})")
    if any(c.isspace() or ord(c) < 32 for c in path) or "\\" in path or "#" in path:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT,
                          f"request {index}: the path has whitespace, control characters, '\\' or '#'")


def check_requests(requests: list[RequestSpec]) -> None:
    """Refuse, with a named code, anything a scenario may not ask for."""
    if not requests:
        raise ToolFailure(ErrorCode.MISSING_ARGUMENT, "a scenario needs at least one request")
    if len(requests) > MAX_REQUESTS:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"a scenario has at most {MAX_REQUESTS} requests (got {len(requests)})")
    size = len(json.dumps([r.wire() for r in requests], default=str))
    if size > MAX_INPUT_BYTES:
        raise ToolFailure(ErrorCode.TOO_LARGE, f"the scenario is {size} bytes of JSON; the limit is {MAX_INPUT_BYTES}")
    for index, request in enumerate(requests):
        check_path(request.path, index)
        headers = request.headers or {}
        if len(headers) > MAX_HEADERS:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT,
                              f"request {index} has {len(headers)} headers; the limit is {MAX_HEADERS}")
        for name, value in headers.items():
            check_header(name, value)
        statuses = request.expected_status if isinstance(request.expected_status, list) else [request.expected_status]
        if any(s is not None and not 100 <= s <= 599 for s in statuses):
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"request {index}: an expected status must be between 100 and 599")


def credential_values(requests: list[RequestSpec]) -> set[str]:
    """Literal credential values a definition holds (redacted wherever they might show)."""
    found: set[str] = set()
    for request in requests:
        for name, value in (request.headers or {}).items():
            if is_secret_name(name) and value:
                found.add(value)
                scheme, _, rest = value.partition(" ")
                if rest.strip() and scheme.isalpha() and "{{" not in rest:
                    found.add(rest.strip())
    return {v for v in found if "{{" not in v}


def definition_digest(requests: list[RequestSpec], backend: str | None) -> str:
    data = json.dumps({"requests": [r.wire() for r in requests], "backend": backend or ""}, sort_keys=True, default=str)
    return hashlib.sha256(data.encode()).hexdigest()


def scenario_key(scenario_id: str | None, name: str | None) -> str | None:
    """The id a scenario is retained under: ``scenario_id``, else a slug of ``name``, else None."""
    if scenario_id:
        return scenario_id
    if name:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name.strip()).strip("-").lower()
        return slug[:80] or None
    return None
