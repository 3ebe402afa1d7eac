"""The quiet ``sh_run`` result: always ``id``, ``exit``, ``ok``, ``ms``; everything else only when it says something.

``ok`` is the exit code's verdict (0) and nothing else; ``expect`` post-conditions are checked
separately (``assert_ok``, ``assertions_failed``), so a passing command with a failed assertion
still says ``ok: true``. ``succeeded`` combines both for the boundary: the call did what was
asked. Output is condensed here; the record store keeps it whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernel_ext.sandbox.shares import MEMORY_LIMIT
from kernel_ext.sandbox.shtools import condense
from kernel_ext.sandbox.shtools.effects import changed_paths
from kernel_ext.sandbox.shtools.options import Expect, ShRunRequest, stdout_regex
from kernel_ext.sandbox.shtools.runner import Attempt, Placement, network_fields
from kernel_ext.shellplan.plan import Plan
from kernel_ext.shellplan.verdict import DESTRUCTIVE


@dataclass(frozen=True)
class Facts:
    """Everything known after a foreground run, for the result and the stored record."""

    record_id: str
    request: ShRunRequest
    plan: Plan
    placement: Placement
    tier: str
    attempts: list[Attempt]
    files_changed: list[str] | None
    changes_complete: bool
    trace_summary: dict[str, Any] | None
    trace_unavailable: str | None
    has_checkpoint: bool

    @property
    def last(self) -> Attempt:
        return self.attempts[-1]


def as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def expected_exit(request: ShRunRequest) -> int:
    return request.expect.exit if request.expect is not None and request.expect.exit is not None else 0


def check_expect(expect: Expect, facts: Facts, exists: Callable[[str], bool], relative: Callable[[str], str]) -> list[str]:
    """The post-conditions that failed, each as one line."""
    last = facts.last
    failed: list[str] = []
    if expect.exit is not None and last.exit_code != expect.exit:
        failed.append(f"exit: expected {expect.exit}, got {last.exit_code}")
    stdout = last.stdout.decode("utf-8", "replace")
    for text in as_list(expect.stdout_contains):
        if text not in stdout:
            failed.append(f"stdout_contains: {text!r} not found")
    if expect.stdout_matches is not None and not stdout_regex(expect.stdout_matches).search(stdout):
        failed.append(f"stdout_matches: no match for /{expect.stdout_matches}/")
    if expect.stderr_empty and last.stderr:
        failed.append(f"stderr_empty: stderr has {len(last.stderr)} bytes")
    for path in as_list(expect.file_exists):
        if not exists(path):
            failed.append(f"file_exists: {path!r} does not exist")
    for path in as_list(expect.file_absent):
        if exists(path):
            failed.append(f"file_absent: {path!r} exists")
    if expect.changed is not None:
        changed = changed_paths(facts.files_changed or [])
        if expect.changed is True and not changed:
            failed.append("changed: no file changed")
        elif expect.changed is False and changed:
            failed.append(f"changed: expected no change, {len(changed)} changed")
        elif isinstance(expect.changed, list):
            failed.extend(f"changed: {p!r} did not change" for p in expect.changed if relative(p) not in changed)
    if expect.max_ms is not None and last.ms > expect.max_ms:
        failed.append(f"max_ms: took {last.ms:.0f} ms, limit {expect.max_ms}")
    return failed


def build(facts: Facts, failed: list[str] | None) -> dict[str, Any]:
    """The result dict (JSON-ready), quiet fields left out."""
    req, last = facts.request, facts.last
    result: dict[str, Any] = {"id": facts.record_id, "exit": last.exit_code, "ok": last.exit_code == 0 and not last.timed_out,
                              "ms": round(last.ms)}
    if len(facts.attempts) > 1:
        result["attempts"] = len(facts.attempts)
    if last.exit_code is not None and last.exit_code < 0:
        result["signal"] = -last.exit_code
    if last.timed_out:
        result["timed_out"] = True
    if last.capped:
        result["output_capped"] = True
    if last.memory_note:
        result["stopped_by"] = MEMORY_LIMIT
        result["memory_limit"] = last.memory_note.partition(": ")[2]
    views = {}
    for name, data, lines in (("stdout", last.stdout, last.stdout_lines), ("stderr", last.stderr, last.stderr_lines)):
        if lines:
            result[f"{name}_lines"] = lines
        views[name] = condense.view(data, full=req.full, total_lines=lines)
        if views[name].truncated or last.capped:
            result[f"{name}_truncated"] = True
        if views[name].binary:
            result[f"{name}_binary"] = True
    if facts.files_changed:
        result["files_changed"] = facts.files_changed[:50]
        if len(facts.files_changed) > 50:
            result["files_changed_total"] = len(facts.files_changed)
    if facts.files_changed is not None and not facts.changes_complete:
        result["files_changed_partial"] = True
    result["tier"] = facts.tier
    result["sandboxed"] = facts.tier != "off"  # always said, so a reader never has to infer it from the tier
    if facts.placement.confined_writes:
        result["writes_confined_to"] = facts.placement.cwd
    result.update(network_fields(facts.placement.conf, last.net_note))
    if facts.placement.secrets_protected:
        result["secrets_protected"] = facts.placement.secrets_protected
    if last.secrets_removed:
        result["secrets_env_scrubbed"] = last.secrets_removed
    if req.no_store:
        result["stored"] = "memory-only"
    if facts.trace_summary is not None:
        result["trace_summary"] = facts.trace_summary
    if facts.trace_unavailable:
        result["trace_unavailable"] = facts.trace_unavailable
    if failed is not None:
        result["assert_ok"] = not failed
        if failed:
            result["assertions_failed"] = failed
    result["risk"] = facts.plan.category
    tips = advice(facts, result)
    if tips:
        result["advice"] = tips
    next_step = hint(facts, result)
    if next_step:
        result["hint"] = next_step
    for name in ("stdout", "stderr"):
        if views[name].text:
            result[name] = views[name].text
    return result


def advice(facts: Facts, result: dict[str, Any]) -> list[str]:
    tips = []
    last = facts.last
    if last.timed_out:
        tips.append("the timeout killed the process tree; run servers and watchers with background: true and poll them with "
                    "sh_logs")
    if last.exit_code == 127:
        tips.append("command not found in the sandbox: programs come from the system, the server's Python and ~/.local/bin")
    if last.capped:
        tips.append("the output passed the capture cap and the command was stopped; send bulky output to a file")
    if result.get("stdout_truncated") or result.get("stderr_truncated"):
        tips.append(f"the full output is stored: sh_detail {{id: {facts.record_id!r}, selector: 'stdout', match: 'ERROR'}} finds "
                    "lines without re-running")
    if facts.plan.category == DESTRUCTIVE and not facts.has_checkpoint:
        tips.append("a destructive command ran with no checkpoint of this project; "
                    "sh_checkpoint first makes such a step undoable")
    return tips


def hint(facts: Facts, result: dict[str, Any]) -> str:
    """One line for a call that did not do what was asked: where to look next (empty when it did).

    ``advice`` says how to run such a command better; ``hint`` says what to read about this one,
    from the stored record, so the model does not re-run a command to see why it failed.
    """
    last, rid = facts.last, facts.record_id
    if last.timed_out:
        return f"inconclusive: the command was stopped at its timeout; its output so far is stored (sh_detail {{id: {rid!r}}})"
    if last.memory_note:
        return (f"{last.memory_note.partition(': ')[2]}: use less memory at once (smaller batches, streaming), or ask "
                "the operator for a larger sandbox (BESSER_SANDBOX_MEMORY)")
    if last.exit_code == 127:
        return "the shell could not find the program: check its name, or install it with install_dependencies"
    if result.get("signal"):
        return f"the command was killed by signal {result['signal']}; sh_detail {{id: {rid!r}, selector: 'meta'}} has what is known"
    if not result["ok"]:
        stream = "stderr" if last.stderr else "stdout"
        return (f"exit {last.exit_code}: find the cause without re-running: "
                f"sh_detail {{id: {rid!r}, selector: {stream!r}, match: 'error|Error|FAIL'}}")
    if result.get("assertions_failed"):
        return "the command ran, but the expect post-conditions in assertions_failed did not hold"
    return ""


def succeeded(request: ShRunRequest, result: dict[str, Any]) -> bool:
    """What the caller asked for happened: the expected exit (default 0), in time, every assertion held."""
    if result.get("timed_out") or result.get("output_capped"):
        return False
    return result["exit"] == expected_exit(request) and result.get("assert_ok", True)


def render(result: dict[str, Any]) -> str:
    """The model's view: one JSON line of fields, then the condensed streams as plain text."""
    head = {k: v for k, v in result.items() if k not in ("stdout", "stderr")}
    parts = [json.dumps(head, ensure_ascii=False, separators=(", ", ": "))]
    for name in ("stdout", "stderr"):
        if result.get(name):
            parts.append(f"--- {name} ---\n{result[name]}")
    return "\n".join(parts)


def stored_meta(facts: Facts, result: dict[str, Any]) -> dict[str, Any]:
    """What ``sh_detail {selector: meta}`` returns: the result's fields plus the request and byte counts."""
    meta = {k: v for k, v in result.items() if k not in ("stdout", "stderr")}
    last = facts.last
    meta.update(
        command=facts.request.command, cwd=facts.placement.cwd, background=False, status="exited",
        stdout_bytes=len(last.stdout), stderr_bytes=len(last.stderr), plan=facts.plan.as_dict(),
        attempt_exits=[a.exit_code for a in facts.attempts],
    )
    if facts.request.expect is not None:
        meta["expect"] = facts.request.expect.model_dump(exclude_none=True)
    return meta
