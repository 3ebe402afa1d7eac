"""A task of the evaluation: a model, a request in a person's words, a verifier, and its scripts."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernel_ext.eval.scripts import ScriptKind, null_script
from kernel_ext.eval.verify import Check
from kernel_ext.providers.scripted import Script, Turn


@dataclass(frozen=True)
class Task:
    id: str
    model: str  # a key of ``eval.models.MODELS``
    request: str  # what a person types
    covers: str  # what people ask for that this task stands for (the list)
    checks: tuple[Check, ...]  # the task's own checks; the baseline ones are added by ``all_checks``
    oracle: Callable[[], list[Turn]]
    wrong: Callable[[], list[Turn]]
    wrong_fails: str  # the check the wrong script must fail (a verifier that passes it is a defect)
    wrong_does: str  # what the wrong script does, in a few words
    baseline: bool = True  # also check the scaffold's CRUD and the generator files
    target: str = "fastapi_backend"  # the generator, named as a person would with --target

    def all_checks(self) -> tuple[Check, ...]:
        from kernel_ext.eval.scaffold import baseline

        return (*self.checks, *baseline(self.model)) if self.baseline else self.checks

    def script(self, kind: ScriptKind) -> Script:
        if kind == "null":
            return null_script(self.id)
        source = self.oracle if kind == "oracle" else self.wrong
        return Script.of(f"{self.id}-{kind}", source())


FAR_EXPIRY = 4102444800  # 2100-01-01: a forged token must be refused for its signature, not its age


def forged_tokens(claims: dict[str, Any]) -> tuple[str, ...]:
    """Bearer tokens claiming ``claims`` (valid until 2100) that the app never signed: an HS256 token
    with a wrong signature, and one with ``alg: none`` and no signature. An app that reads a token's
    claims without checking its signature accepts both (a token with no claims does not show that:
    it is refused for having no expiry or no user)."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).rstrip(b"=").decode()

    body = part({**claims, "exp": FAR_EXPIRY})
    return (f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{body}.bm90LXRoZS1hcHBzLXNpZ25hdHVyZQ",
            f"{part({'alg': 'none', 'typ': 'JWT'})}.{body}.")
