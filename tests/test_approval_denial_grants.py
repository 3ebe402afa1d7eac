"""A denial never grants: "the rest of this kind" sent with a *denial* leaves the next call of
that category asking, through each entry point a person's decision takes (the Python API, the
run view's card, REST on a real Jupyter server).

The audit's survivor: ``if rest_of_kind and approved:`` weakened to ``if rest_of_kind:`` in the
approver made a denial with the flag approve every later edit without a card.
"""

from __future__ import annotations

import json

import pytest
from boundary_fixtures import TOOLS
from jupyter_fixtures import extension_config, jp_asyncio_loop, jp_server_config, poll, runs_dir  # noqa: F401
from test_approval_grants import digest_of, python_api

from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall
from kernel_ext.hosting.layout import RunLayout
from kernel_ext.hosting.run import start_run
from kernel_ext.pipeline.reporting import boundary_observer, report_call, report_result
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace import Workspace

PUT = next(spec for spec in TOOLS if spec.name == "put")
PLAN = (("a.txt", "one"), ("b.txt", "two"), ("c.txt", "three"))


def body(results: list):
    async def run_body(ctx) -> None:
        executor = Executor(ToolCatalog((PUT,)), ToolContext(services={"workspace": Workspace(ctx.layout.app_dir)}),
                            policy=ExecutionPolicy.allowing([Category.EDIT]), approver=ctx.approver,
                            observer=boundary_observer(ctx.events, ctx.approver), run_id=ctx.run_id)
        for path, content in PLAN:
            call = ToolCall(f"model-{len(results)}", "put", {"path": path, "content": content})
            report_call(ctx.events, call)
            result = await executor.execute(call)
            report_result(ctx.events, result)
            results.append(result)

    return run_body


def card_deny_with_flag(run):
    """The run view's card, fed by the run's events; a denial sent through the card's own click
    with the rest-of-kind flag (its buttons offer the flag only with an approval: this is the
    widget's deny path given the flag, what a crafted front end could send)."""
    from widgets.runview import RunView

    view = RunView(run_id=run.id, decide=lambda c, a, digest=None, rest_of_kind=False: run.decide(
        c, a, digest=digest, rest_of_kind=rest_of_kind))
    view.replay(run.events.events)
    run.events.add_listener(view.apply)

    def decide(run, call_id: str, approved: bool, rest_of_kind: bool = False):
        card = view.card(call_id)
        if rest_of_kind:
            card.click(approved, rest_of_kind=True)
        else:
            (card.approve_button if approved else card.deny_button).click()
        return card

    return decide, view


def rest_decide(jp_fetch):
    async def decide(run, call_id: str, approved: bool, rest_of_kind: bool = False):
        body = {"approved": approved, "rest_of_kind": True} if rest_of_kind else {"approved": approved}
        response = await jp_fetch("besser-agent", "runs", run.id, "approvals", call_id, method="POST", body=json.dumps(body))
        assert response.code == 200 and json.loads(response.body).get("status")
        return response.code

    return decide


async def denial_flow(tmp_path, run, results, decide) -> None:
    async def answered(outcome):
        return await outcome if hasattr(outcome, "__await__") else outcome

    before = digest_of(run.context.layout.app_dir)
    (first,) = await poll(run.pending_approvals)
    await answered(decide(run, first, False, rest_of_kind=True))  # a denial, sent with "the rest of this kind"

    # The next edit must ask again: a card, not a grant (a run that ended instead is the bug).
    nxt = await poll(lambda: [c for c in run.pending_approvals() if c != first] or run.task.done())
    assert nxt is not True, "the edit after a denial with the rest-of-kind flag got no card"
    (second,) = nxt
    assert run.context.approver.grants.all() == ()
    assert digest_of(run.context.layout.app_dir) == before  # nothing written yet
    await answered(decide(run, second, True))
    (third,) = await poll(lambda: [c for c in run.pending_approvals() if c not in (first, second)])
    await answered(decide(run, third, False))
    await run.wait()

    resolved = [(e.approved, e.by) for e in run.events.events if e.type == "approval_resolved"]
    assert resolved == [(False, "card"), (True, "card"), (False, "card")]
    assert run.context.approver.grants.all() == ()
    assert [(r.ok, r.error_code) for r in results] == [(False, "approval_denied"), (True, ""), (False, "approval_denied")]
    denied = [r.observation for r in results if not r.ok]  # the person's "no" is named as theirs (issue 31, item 10)
    assert all("the person denied" in m and "on its card; nothing ran" in m for m in denied), denied
    assert {p.name: p.read_text() for p in run.context.layout.app_dir.iterdir() if p.suffix == ".txt"} == {"b.txt": "two"}


@pytest.mark.parametrize("entry", ["python", "card"])
async def test_a_denial_with_the_rest_of_kind_flag_grants_nothing(tmp_path, entry):
    results: list = []
    run = start_run(body(results), RunLayout.create(tmp_path / "runs"), approval_timeout=60)
    if entry == "card":
        decide, view = card_deny_with_flag(run)
        await denial_flow(tmp_path, run, results, decide)
        card = view.card(run.events.of_type("approval_requested")[0].call_id)
        assert card.decided and "rest of" not in card._html.value  # the card shows a denial, no grant
    else:
        await denial_flow(tmp_path, run, results, python_api)


async def test_over_rest_a_denial_with_the_rest_of_kind_flag_grants_nothing(tmp_path, jp_fetch, jp_serverapp):
    from kernel_ext.server.handlers.base import STATE_KEY

    results: list = []
    run = jp_serverapp.web_app.settings[STATE_KEY].manager.start_body(body(results))
    await denial_flow(tmp_path, run, results, rest_decide(jp_fetch))


# -- the grant rules themselves (boundary/grants.py), on frozen requests as the approver holds them --


def frozen(name: str, category: str, call_id: str = "c1"):
    from kernel_ext.boundary.approval import ApprovalRequest

    return ApprovalRequest(call_id, name, category, ())


@pytest.mark.parametrize(("name", "category"), [
    ("custom_tool", "shell"),  # shell by category alone
    ("sh_anything", "edit"),  # by the sh_ prefix alone
    ("run_command", "edit"), ("install_dependencies", "generate"),  # by name alone
])
def test_a_shell_call_by_category_or_by_name_is_never_granted_nor_covered(name, category):
    from kernel_ext.boundary.grants import KindGrants, is_shell, refusal

    assert is_shell(name, category)
    assert refusal(name, category) == f"{name!r} is a shell command: each one is approved on its own card"
    grants = KindGrants()
    with pytest.raises(ValueError, match="shell command"):
        grants.add(frozen(name, category), "card")
    grants.add(frozen("put", "edit"), "card")
    assert grants.covering(frozen(name, "edit", "c2")) is None or not is_shell(name, "edit")
    assert not is_shell("put", "edit") and not is_shell("shell_notes", "edit")


def test_a_second_grant_of_a_category_keeps_the_first():
    from kernel_ext.boundary.grants import KindGrants

    grants = KindGrants()
    first = grants.add(frozen("put", "edit", "c1"), "card")
    again = grants.add(frozen("put", "edit", "c2"), "rest")
    assert again is first and grants.all() == (first,) and first.call_id == "c1"
    assert grants.covering(frozen("put", "edit", "c3")) is first and grants.covering(frozen("gen", "generate", "c4")) is None
