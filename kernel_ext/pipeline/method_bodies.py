"""The host-owned step before Phase 1: a model's method bodies enter generated code only on a yes.

Method bodies from a model file become code in the generated app (``model/method_bodies.py``).
Before Phase 1 the orchestrator asks, once per run, on an approval card of category
``generate`` that shows every foreign body as code (so ``--approve edits|shell|all`` and a
scripted host approver answer it like any other card). Approved: the model is generated as
given. Denied, timed out, or the operator's ``BESSER_MODEL_METHOD_BODIES=off``: Phase 1
generates from a copy whose methods are stubs, and a named finding says so. The package's own
example bodies need no card. The same decision serves the command line's Phase-1-only path and
``tool --model``, where nobody is there to ask (``decide_without_card``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernel_ext.findings import Finding
from kernel_ext.model.method_bodies import ENV, MethodBody, foreign_bodies, listing, without_bodies

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

    from kernel_ext.boundary.approval import Approver, Observer

CARD_NAME = "model_method_bodies"
CODE = "model_method_bodies_removed"
MAX_SHOWN_CHARS = 200_000


@dataclass
class Settled:
    """The model Phase 1 generates from, and what a person should know about its bodies."""

    model: Any
    findings: list[Finding] = field(default_factory=list)


def request_for(bodies: list[MethodBody], run_id: str = "") -> Any:
    """The frozen card: each method's code as arguments and as an added-lines proposal."""
    from kernel_ext.boundary.approval import ApprovalRequest, freeze_arguments
    from kernel_ext.tools.base import Category

    digest = hashlib.sha256("\0".join(f"{b.where}\0{b.code}" for b in bodies).encode("utf-8", "surrogatepass")).hexdigest()
    arguments = {"methods": [{"class": b.owner, "method": b.method, "code": b.code} for b in bodies]}
    return ApprovalRequest(
        call_id=f"model-methods-{digest[:12]}",
        name=CARD_NAME,
        category=str(Category.GENERATE),
        arguments=freeze_arguments(arguments),
        proposal=listing(bodies),
        details=freeze_arguments({"why": f"{len(bodies)} method bodies from the model would become code in the generated app"}),
        run_id=run_id,
    )


async def settle_method_bodies(model: DomainModel, mode: str, approver: Approver, observe: Observer,
                               run_id: str = "") -> Settled:
    """Ask ``approver`` (host code) about the model's foreign bodies; strip them unless it says yes.

    ``observe`` is the run's boundary observer, so the card is an ``approval_requested`` /
    ``approval_resolved`` pair like every other card.
    """
    from kernel_ext.boundary.approval import BoundaryEvent
    from kernel_ext.tools.base import maybe_await

    bodies = foreign_bodies(model)
    if not bodies:
        return Settled(model)
    if mode == "off":
        return _stripped(model, bodies, f"the operator turned model method bodies off ({ENV}=off)")
    size = sum(len(b.code) for b in bodies)
    if size > MAX_SHOWN_CHARS:  # code nobody can read on a card is code nobody approved
        return _stripped(model, bodies, f"{size} characters of code are more than one card shows ({MAX_SHOWN_CHARS})")
    request = request_for(bodies, run_id)
    await maybe_await(observe(BoundaryEvent("approval_requested", request.call_id, request.name, request=request)))
    approved = await maybe_await(approver(request)) is True  # only a literal True grants
    await maybe_await(observe(BoundaryEvent("approval_resolved", request.call_id, request.name, approved=approved)))
    if approved:
        return Settled(model, [Finding("info", "model", f"{len(bodies)} model method bodies approved: {_where(bodies)}",
                                       code="model_method_bodies_approved")])
    return _stripped(model, bodies, "the card showing them was not approved")


def decide_without_card(model: DomainModel, mode: str, approved: bool, *, hint: str = "pass --approve edits to keep them") -> Settled:
    """Where nobody can be asked (the Phase-1-only command line, ``tool --model``): ``approved`` is
    the person's flag given up front; ``hint`` says which flag that is."""
    bodies = foreign_bodies(model)
    if not bodies or (mode != "off" and approved):
        return Settled(model)
    why = f"the operator turned model method bodies off ({ENV}=off)" if mode == "off" else (
        f"nobody was there to approve them ({hint})")
    return _stripped(model, bodies, why)


def _stripped(model: DomainModel, bodies: list[MethodBody], why: str) -> Settled:
    message = (f"{len(bodies)} model method bodies were not generated ({why}): {_where(bodies)} "
               "are stubs; write their code in the generated app, or approve the card")
    return Settled(without_bodies(model, bodies), [Finding("warning", "model", message, code=CODE)])


def _where(bodies: list[MethodBody]) -> str:
    names = [b.where for b in bodies[:10]]
    return ", ".join(names) + (f" and {len(bodies) - 10} more" if len(bodies) > 10 else "")
