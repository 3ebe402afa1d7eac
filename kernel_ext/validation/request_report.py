"""The scenario report as data: per request what was sent, what came back, what was expected.

Built from the child's (already redacted) result, redacted once more here with what the
server knows (the literal credentials the definition holds, key-shaped strings), so the
report, ``get``, events and traces can all be given this object as-is. ``to_text`` is what
the model reads; ``to_html`` (``report_html``) is what the notebook shows; the field names are
those the ``RequestReport`` widget reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kernel_ext.secrets import redact

TEXT_BODY_CHARS = 600


class Assertion(BaseModel):
    model_config = ConfigDict(extra="ignore")

    path: str
    expected: Any = None
    actual: Any = None
    ok: bool
    message: str = ""


class Message(BaseModel):
    """One side of an exchange: headers and a body (cut to a preview, with counts)."""

    model_config = ConfigDict(extra="ignore")

    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None
    body_chars: int = 0
    body_bytes: int = 0
    truncated: bool = False


class RequestResult(BaseModel):
    model_config = ConfigDict(extra="ignore")

    index: int
    method: str
    path: str  # references resolved
    status: int | None = None
    expected_status: int | list[int] | None = None
    assertions: list[Assertion] = Field(default_factory=list)
    passed: bool = False
    duration_ms: float = 0.0
    request: Message = Field(default_factory=Message)
    response: Message = Field(default_factory=Message)
    error: str | None = None
    redirected_from: list[str] = Field(default_factory=list)


class ScenarioReport(BaseModel):
    """One execution of one scenario."""

    model_config = ConfigDict(extra="ignore")

    scenario_id: str | None = None
    name: str | None = None
    passed: bool = False
    backend: str = ""
    source_digest: str = ""
    requests: list[RequestResult] = Field(default_factory=list)
    startup_error: str | None = None
    error: str | None = None  # the run itself failed (timeout, host gone)
    error_code: str | None = None
    app_log_tail: str = ""
    sandbox: str = ""
    network: bool = False
    notes: list[str] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict)
    total_ms: float = 0.0

    @property
    def failures(self) -> list[str]:
        out = []
        if self.error:
            out.append(self.error)
        if self.startup_error:
            out.append(f"application startup: {self.startup_error}")
        for r in self.requests:
            if r.passed:
                continue
            reasons = [f"{a.path}: {a.message or f'expected {a.expected!r}, got {a.actual!r}'}" for a in r.assertions if not a.ok]
            if r.error:
                reasons.insert(0, r.error)
            if not reasons and r.status is not None and r.status >= 500:
                reasons.append(f"server error {r.status}")
            out.append(f"#{r.index} {r.method} {r.path}: " + ("; ".join(reasons) or "failed"))
        return out

    @property
    def crashed(self) -> bool:
        """The run, the start-up or a request failed by an error (not by an expectation)."""
        return bool(self.error or self.startup_error or any(r.error or (r.status or 0) >= 500 for r in self.requests))

    def summary(self) -> str:
        label = self.scenario_id or self.name or "scenario"
        passed = sum(1 for r in self.requests if r.passed)
        state = "passed" if self.passed else "FAILED"
        return f"{label}: {state} ({passed}/{len(self.requests)} requests passed, {self.total_ms:.0f} ms)"

    def to_text(self, body_chars: int = TEXT_BODY_CHARS) -> str:
        lines = [self.summary()]
        if self.error:
            lines.append(f"error: {self.error}")
        if self.startup_error:
            lines.append(f"application startup failed: {self.startup_error}")
        for r in self.requests:
            mark = "ok " if r.passed else "FAIL"
            expected = f" (expected {r.expected_status})" if r.expected_status is not None else ""
            lines.append(f"[{mark}] #{r.index} {r.method} {r.path} -> {r.status}{expected} {r.duration_ms:.0f} ms")
            if r.error:
                lines.append(f"       error: {r.error}")
            for a in r.assertions:
                if not a.ok and a.path != "status":
                    lines.append(f"       {a.path}: {a.message or f'expected {a.expected!r}, got {a.actual!r}'}")
            if not r.passed and r.response.body not in (None, ""):
                lines.append("       body: " + _cut(r.response, body_chars))
        if self.crashed and self.app_log_tail.strip():
            tail = self.app_log_tail.strip()[-1500:]
            lines.append("app log (tail):\n" + "\n".join("  " + ln for ln in tail.splitlines()[-25:]))
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)

    def to_html(self) -> str:
        from kernel_ext.validation.report_html import scenario_html

        return scenario_html(self)

    def _repr_html_(self) -> str:
        return self.to_html()

    def for_widget(self) -> dict[str, Any]:
        """The dict the ``RequestReport`` widget takes (``requests`` rows plus a summary)."""
        data = self.model_dump(mode="json")
        data["summary"] = self.summary()
        data["failures"] = self.failures
        return data


def _cut(message: Message, chars: int) -> str:
    text = message.body if isinstance(message.body, str) else json.dumps(message.body, ensure_ascii=False)
    more = max(message.body_chars, len(text)) - min(len(text), chars)
    return text[:chars] + (f" ... [{more} more characters]" if more > 0 else "")


def build_report(reply: dict[str, Any], *, scenario_id: str | None, name: str | None, backend: str, digest: str,
                 known_secrets: Iterable[str] = (), sandbox: str = "", network: bool = False,
                 notes: Iterable[str] = (), total_ms: float = 0.0) -> ScenarioReport:
    """A report from the host's reply frame, redacted again with what the server knows."""
    known = tuple(s for s in known_secrets if s)
    report = ScenarioReport(scenario_id=scenario_id, name=name, backend=backend, source_digest=digest, sandbox=sandbox,
                            network=network, notes=list(notes), total_ms=round(total_ms, 2))
    if reply.get("op") != "result":
        report.error = str(redact(reply.get("message") or "the app host failed", known))
        report.error_code = str(reply.get("code") or "host_error")
        report.app_log_tail = str(redact(reply.get("log_tail") or "", known))
        return report
    result = redact(reply.get("result") or {}, known)
    if result.get("internal_error"):
        report.error, report.error_code = f"the scenario runner failed: {result['internal_error']}", "runner_failed"
        return report
    boot = result.get("boot") or {}
    lifespan = result.get("lifespan") or {}
    if not boot.get("ok", False):
        report.startup_error = boot.get("error") or "the app did not import"
        tb = boot.get("traceback") or ""
        report.app_log_tail = (tb + "\n" + (result.get("log_tail") or "")).strip()
    elif lifespan and not lifespan.get("ok", True):
        report.startup_error = f"start-up handler failed: {lifespan.get('error')}"
    report.requests = [RequestResult.model_validate(row) for row in result.get("requests") or []]
    if not report.app_log_tail:
        report.app_log_tail = result.get("log_tail") or ""
    report.timings = {k: float(v) for k, v in {
        "copy_ms": boot.get("copy_ms"), "boot_ms": boot.get("import_ms"), "startup_ms": lifespan.get("startup_ms"),
        "requests_ms": result.get("requests_ms"), "job_ms": result.get("job_ms"), "host_ms": reply.get("wall_ms"),
    }.items() if isinstance(v, (int, float))}
    report.timings["prepared_in_advance"] = 1.0 if reply.get("from_standby") else 0.0
    report.passed = report.startup_error is None and bool(report.requests) and all(r.passed for r in report.requests)
    return report
