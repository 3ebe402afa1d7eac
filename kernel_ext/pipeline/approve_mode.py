"""A person's ``--approve`` choice (``RunRequest.approve``): which categories need no card.

The choice only narrows what asks a person; the operator's policy still decides what may run
at all, and a call outside the listed categories reaches the card as before.
"""

from __future__ import annotations

from typing import Any

from kernel_ext.boundary import ApprovalRequest
from kernel_ext.tools.base import Category

AUTO_APPROVED = {
    "none": frozenset(),
    "edits": frozenset({Category.EDIT, Category.GENERATE}),
    "shell": frozenset({Category.EDIT, Category.GENERATE, Category.SHELL}),
    "all": frozenset({Category.EDIT, Category.GENERATE, Category.SHELL, Category.TEST}),
}


class ModeApprover:
    """The person's ``--approve`` choice: listed categories pass without a card, others ask."""

    def __init__(self, inner: Any, mode: str):
        self.inner = inner
        self.auto = AUTO_APPROVED[mode]
        self.decided_by = inner.decided_by
        self.notes = getattr(inner, "notes", {})
        self.timeout = getattr(inner, "timeout", None)

    async def __call__(self, request: ApprovalRequest) -> bool:
        if request.category in self.auto:
            self.decided_by[request.call_id] = "auto"
            return True
        return await self.inner(request)
