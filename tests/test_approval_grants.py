"""'Approve the rest of this kind for this run': only a person's decision on a pending card makes
a grant; it covers one category of one run, never a shell command, and every call it covers
records it. Hosted runs (real ``start_run``, real ``AsyncApprover``, real Executor over real
files); the person decides through the Python API (``run.decide``) or the card's button on a
real ``RunView``, or over REST on a real Jupyter server (the run hosted by the server's own
manager, the decisions POSTed with the server's token; a POST without it decides nothing).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from functools import partial
from pathlib import Path

import pytest
from boundary_fixtures import TOOLS, PathArgs
from jupyter_fixtures import extension_config, jp_asyncio_loop, jp_server_config, poll, runs_dir  # noqa: F401
from tornado.httpclient import HTTPClientError

from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall
from kernel_ext.hosting.layout import RunLayout
from kernel_ext.hosting.run import start_run
from kernel_ext.pipeline.reporting import boundary_observer, report_call, report_result
from kernel_ext.tools.base import Category, ToolContext, ToolOutcome, ToolSpec
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace import Workspace

ROOT = Path(__file__).resolve().parent.parent
SHELL_RAN: list[str] = []


def _ran(args: PathArgs, ctx: ToolContext) -> ToolOutcome:
    SHELL_RAN.append(args.path)
    return ToolOutcome("ran")


# A stand-in for the shell tools (the real ones need the operator's shell service): same names and
# category, so the approval path the boundary takes is the real one; running it only records.
SHELL = tuple(ToolSpec(name, Category.SHELL, PathArgs, "stand-in shell tool", _ran) for name in ("run_command", "sh_run"))
PUT = next(spec for spec in TOOLS if spec.name == "put")

# What the "model" proposes, in order: three edits, two shell commands, and two attempts to
# approve for itself (a tool that does not exist, an argument that is not in the schema).
PLAN = (
    ("put", {"path": "a.txt", "content": "one"}),
    ("approve_rest_of_kind", {"category": "edit"}),
    ("put", {"path": "b.txt", "content": "two", "rest_of_kind": True}),
    ("run_command", {"path": "echo hi"}),
    ("put", {"path": "b.txt", "content": "two"}),
    ("sh_run", {"path": "echo again"}),
    ("put", {"path": "c.txt", "content": "three"}),
)


def body(results: list):
    async def run_body(ctx) -> None:
        executor = Executor(ToolCatalog((PUT, *SHELL)), ToolContext(services={"workspace": Workspace(ctx.layout.app_dir)}),
                            policy=ExecutionPolicy.allowing([Category.EDIT, Category.SHELL]), approver=ctx.approver,
                            observer=boundary_observer(ctx.events, ctx.approver), run_id=ctx.run_id)
        for name, arguments in PLAN:
            call = ToolCall(f"model-{len(results)}", name, dict(arguments))
            report_call(ctx.events, call)
            result = await executor.execute(call)
            report_result(ctx.events, result)
            results.append(result)

    return run_body


def digest_of(tree: Path) -> dict[str, str]:
    return {str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(tree.rglob("*")) if p.is_file()}


def python_api(run, call_id: str, approved: bool, rest_of_kind: bool = False):
    return run.decide(call_id, approved, rest_of_kind=rest_of_kind)


class CardClicks:
    """A real RunView fed by the run's events, decisions sent as the in-process backend does."""

    def __init__(self, run):
        from widgets.runview import RunView

        self.view = RunView(run_id=run.id, decide=lambda c, a, digest=None, rest_of_kind=False: run.decide(
            c, a, digest=digest, rest_of_kind=rest_of_kind))
        self.view.replay(run.events.events)
        run.events.add_listener(self.view.apply)

    def __call__(self, run, call_id: str, approved: bool, rest_of_kind: bool = False):
        card = self.view.card(call_id)
        if rest_of_kind:
            button = card.controls.rest_button
            if button.layout.display == "none":  # the card does not offer it (a shell card)
                return run.decide(call_id, approved, rest_of_kind=True)  # what a crafted request would do
            button.click()
        else:
            (card.approve_button if approved else card.deny_button).click()
        return card


class RestDecisions:
    """Decisions POSTed to ``runs/{id}/approvals/{call}`` with the server's token, as the card's client does."""

    def __init__(self, jp_fetch):
        self.fetch = jp_fetch

    async def post(self, run, call_id: str, body: dict, token: str | None = None):
        headers = None if token is None else {"Authorization": token}
        try:
            response = await self.fetch("besser-agent", "runs", run.id, "approvals", call_id, method="POST",
                                        body=json.dumps(body), headers=headers)
        except HTTPClientError as exc:
            return exc.code, json.loads(exc.response.body or b"{}").get("code")
        return response.code, json.loads(response.body).get("status")

    async def __call__(self, run, call_id: str, approved: bool, rest_of_kind: bool = False):
        status, _ = await self.post(run, call_id, {"approved": approved, "rest_of_kind": rest_of_kind} if rest_of_kind
                                    else {"approved": approved})
        assert status == 200
        return status


async def decided(outcome):
    return await outcome if asyncio.iscoroutine(outcome) else outcome


@pytest.mark.parametrize("entry", ["python", "card"])
async def test_a_person_grants_the_rest_of_the_edits_never_shell(tmp_path, entry):
    results: list = []
    run = start_run(body(results), RunLayout.create(tmp_path / "runs"), approval_timeout=60)
    await grant_flow(tmp_path, run, results, python_api if entry == "python" else CardClicks(run), entry)


async def test_over_rest_a_grant_needs_the_persons_token_and_never_covers_shell(tmp_path, jp_fetch, jp_serverapp):
    from kernel_ext.server.handlers.base import STATE_KEY

    results: list = []
    run = jp_serverapp.web_app.settings[STATE_KEY].manager.start_body(body(results))
    await grant_flow(tmp_path, run, results, RestDecisions(jp_fetch), "rest")


async def grant_flow(tmp_path, run, results, decide, entry: str) -> None:
    """The same person's decisions through one entry point, and what must come of them."""
    SHELL_RAN.clear()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("unchanged")
    before = digest_of(outside)
    pending = lambda: run.pending_approvals()  # noqa: E731

    (first,) = await poll(pending)
    if entry == "rest":  # without the person's token nothing is granted, nor decided
        for token in ("", "token not-the-right-one"):
            status, _ = await decide.post(run, first, {"approved": True, "rest_of_kind": True}, token)
            assert status == 403
        assert run.pending_approvals() == (first,) and run.context.approver.grants.all() == ()
    await decided(decide(run, first, True, rest_of_kind=True))  # the person's click on the first edit card

    (shell,) = await poll(lambda: [c for c in pending() if c != first])  # the model's two attempts were refused
    assert run.context.approver.decided_by.get(shell) is None
    if entry == "rest":  # a grant on a shell card: refused by name, nothing decided
        assert await decide.post(run, shell, {"approved": True, "rest_of_kind": True}) == (409, "GRANT_REFUSED")
    else:
        verdict = run.decide(shell, True, rest_of_kind=True)
        assert not verdict and verdict.code == "GRANT_REFUSED"
    assert run.pending_approvals() == (shell,)
    if entry == "card":
        assert decide.view.card(shell).controls.rest_button.layout.display == "none"
    await decided(decide(run, shell, False))

    (second_shell,) = await poll(lambda: [c for c in pending() if c != shell])
    await decided(decide(run, second_shell, False))  # the edit grant never covers a shell command
    await asyncio.wait_for(run.wait(), 30)

    events = run.events.events
    resolved = {e.call_id: e for e in events if e.type == "approval_resolved"}
    names = {e.call_id: e.name for e in events if e.type == "approval_requested"}
    assert [names[c] for c in resolved] == ["put", "run_command", "put", "sh_run", "put"]
    by = [(names[c], e.approved, e.by) for c, e in resolved.items()]
    assert by == [("put", True, "card"), ("run_command", False, "card"), ("put", True, "grant"),
                  ("sh_run", False, "card"), ("put", True, "grant")]
    for event in resolved.values():
        if event.by == "grant":
            assert re.fullmatch(rf"approved by the rest-of-kind grant made at \d\d:\d\d:\d\d \(on card {first}, category edit\)",
                                event.note)
        elif event.call_id == first:  # the card the grant was made on says so
            assert event.note == "approved, with the rest of the edit calls of this run (a rest-of-kind grant)"
        else:
            assert event.note == ""
    refused = [(r.name, r.error_code) for r in results if not r.ok]
    assert refused == [("approve_rest_of_kind", "unknown_tool"), ("put", "invalid_argument"), ("run_command", "approval_denied"),
                       ("sh_run", "approval_denied")]
    assert SHELL_RAN == []  # neither shell command ran
    grants = run.context.approver.grants.all()
    assert [(g.category, g.call_id, g.by) for g in grants] == [("edit", first, "card")]
    app = run.context.layout.app_dir
    assert {p.name: p.read_text() for p in app.iterdir() if p.suffix == ".txt"} == {"a.txt": "one", "b.txt": "two", "c.txt": "three"}
    assert digest_of(outside) == before


async def test_a_grant_is_scoped_to_its_run(tmp_path):
    """Two runs of the same plan: a grant in one leaves the other asking."""
    one = start_run(body([]), RunLayout.create(tmp_path / "runs"), approval_timeout=60)
    two = start_run(body([]), RunLayout.create(tmp_path / "runs"), approval_timeout=60)
    (first,) = await poll(one.pending_approvals)
    assert one.decide(first, True, rest_of_kind=True)
    (other,) = await poll(two.pending_approvals)
    assert two.context.approver.grants.all() == ()
    assert two.decide(other, False)
    for run in (one, two):
        run.cancel()
        await run.wait()


def test_only_a_persons_decision_reaches_a_grant():
    """Structural: grants are added in one place (the approver's ``resolve``), which only ``Run.decide``
    calls with ``rest_of_kind``; and that flag is passed only by the person's paths (REST decision
    handler, the magics' decide, the card). No tool, pipeline or provider module names it."""
    users: dict[str, set[str]] = {"grants.add(": set(), "rest_of_kind": set()}
    for path in [*(ROOT / "kernel_ext").rglob("*.py"), *(ROOT / "widgets").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        for needle, found in users.items():
            if needle in text:
                found.add(str(path.relative_to(ROOT)))
    assert users["grants.add("] == {"kernel_ext/boundary/approval.py"}
    assert users["rest_of_kind"] == {
        "kernel_ext/boundary/approval.py", "kernel_ext/boundary/grants.py", "kernel_ext/hosting/run.py",
        "kernel_ext/server/handlers/decisions.py",
        "kernel_ext/magics/backends.py", "kernel_ext/magics/client.py", "widgets/approval.py", "widgets/controls.py",
    }


async def test_the_card_shows_when_it_expires_and_an_unanswered_card_is_denied(tmp_path):
    from widgets.runview import RunView

    run = start_run(body([]), RunLayout.create(tmp_path / "runs"), approval_timeout=0.3)
    view = RunView(run_id=run.id, decide=partial(run.decide))
    run.events.add_listener(view.apply)
    (first,) = await poll(run.pending_approvals)
    await poll(lambda: first in view.state.card_of_call)
    requested = next(e for e in run.events.events if e.type == "approval_requested")
    assert requested.expires_at is not None and requested.expires_at >= requested.ts
    label = view.card(first).controls.label.value
    assert re.search(r"expires at \d\d:\d\d:\d\d unless answered", label)
    await poll(lambda: run.context.approver.decided_by.get(first) == "timeout", timeout=10)
    await poll(lambda: view.card(first).card.outcome in ("expired", "denied"))
    run.cancel()
    await run.wait()


async def test_cancel_right_after_a_decision_still_cancels_the_run(tmp_path):
    """The Cancel button's promise: a cancel that lands as a decision arrives ends the run (the
    approver's wait used to swallow it, and the run went on to its next card)."""
    from kernel_ext.scenarios.side_effects_run import side_effects_body

    run = start_run(side_effects_body(), RunLayout.create(tmp_path / "runs"))  # no timeout: a lost cancel would hang
    (edit,) = await poll(run.pending_approvals)
    assert run.decide(edit, True)
    await asyncio.sleep(0)
    assert run.cancel()
    done = await asyncio.wait_for(run.wait(), 30)
    assert done is not None and done.status == "cancelled"


async def test_a_host_steps_card_grants_nothing_and_the_grant_card_says_what_it_granted():
    """The method-bodies card (the host's own step, category generate for the policy) approves only
    itself: a rest-of-kind click on it is refused with nothing decided, and no grant covers it. A
    grant made on a generator card is written on that card's own decision too."""
    from kernel_ext.boundary.approval import ApprovalRequest, AsyncApprover

    approver = AsyncApprover(timeout=30)

    async def ask(call_id: str, name: str) -> asyncio.Task[bool]:
        task = asyncio.create_task(approver(ApprovalRequest(call_id, name, "generate", ())))
        await poll(lambda: approver.pending() if call_id in approver.pending() else None)
        return task

    bodies = await ask("model-methods-1", "model_method_bodies")
    refused = approver.resolve("model-methods-1", True, "card", rest_of_kind=True)
    assert not refused and refused.code == "GRANT_REFUSED" and "host's own step" in refused.reason
    assert approver.grants.all() == () and "model-methods-1" not in approver.decided and not bodies.done()
    assert approver.resolve("model-methods-1", True, "card") and await bodies

    generator = await ask("c1", "generate_sql")
    assert approver.resolve("c1", True, "card", rest_of_kind=True) and await generator
    assert "rest-of-kind grant" in approver.notes["c1"] and approver.decided_by["c1"] == "card"
    assert await approver(ApprovalRequest("c2", "generate_pydantic", "generate", ()))  # covered, no card
    assert approver.decided_by["c2"] == "grant"
    later_bodies = await ask("model-methods-2", "model_method_bodies")  # never covered: asked again
    assert approver.resolve("model-methods-2", False, "card") and not await later_bodies
