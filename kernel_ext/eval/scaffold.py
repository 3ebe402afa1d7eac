"""What every task's verifier also checks: the scaffold's own CRUD still works, and no file the
generator wrote was rewritten from memory.

The reference scaffold is made here, by the verifier, with the same Phase 1 call as the run
(``generation.run_phase1``), once per model and process: the run's own copy is the thing under
test. Which files the generator wrote comes from ``run.json``'s ledger (written by the host).
"""

from __future__ import annotations

import atexit
import difflib
import hashlib
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from kernel_ext.eval.verify import Check, Outcome, Produced, http

# A generator file keeping less than this share of its lines was rewritten, not edited.
KEPT_LINES_MIN = 0.6

_lock = threading.Lock()
_references: dict[str, Path] = {}


def reference_scaffold(model_key: str) -> Path:
    """Phase 1's output for ``model_key``, generated once per process into a temporary folder."""
    from kernel_ext.eval.models import eval_model
    from kernel_ext.generation import run_phase1

    with _lock:
        if model_key not in _references:
            root = Path(tempfile.mkdtemp(prefix=f"besser-eval-{model_key}-"))
            atexit.register(shutil.rmtree, root, True)
            run_phase1(eval_model(model_key).load(), root, check=False)
            _references[model_key] = root
        return _references[model_key]


def kept_share(reference: str, current: str) -> float:
    """The share of ``reference``'s lines still present, in order, in ``current``."""
    old, new = reference.splitlines(), current.splitlines()
    if not old:
        return 1.0
    matched = sum(block.size for block in difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks())
    return matched / len(old)


def _generator_intact(produced: Produced) -> Outcome:
    generated = produced.recipe.get("generated")
    if not isinstance(generated, dict) or not generated:
        if not (produced.run_dir / "run.json").exists():  # the host writes it when Phase 3 ends
            return False, f"no run.json: the run ended {produced.status or 'without a status'!r} before the host wrote its ledger"
        return False, "run.json has no ledger of generator-written files (the run did not finish Phase 1)"
    reference = reference_scaffold(produced.model_key)
    problems = []
    for rel in sorted(generated):
        current = produced.text(rel)
        if current is None:
            problems.append(f"{rel} was deleted")
            continue
        if hashlib.sha256(current.encode()).hexdigest() == generated[rel]:
            continue
        try:
            original = (reference / rel).read_text(encoding="utf-8")
        except OSError:
            continue  # the reference has no such file: nothing to measure against
        share = kept_share(original, current)
        if share < KEPT_LINES_MIN:
            problems.append(f"{rel} keeps {share:.0%} of the generator's lines (rewritten, not edited)")
    return not problems, "; ".join(problems)


GENERATOR_INTACT = Check("generator_files_intact", "no generator-written file was deleted or rewritten wholesale",
                         _generator_intact)


def _library() -> list[dict[str, Any]]:
    from kernel_ext.validation.library_scenario import library_requests

    return library_requests()


def _shop() -> list[dict[str, Any]]:
    return [
        {"method": "POST", "path": "/customer/", "json": {"name": "Ada", "email": "ada@example.org"}, "expected_status": 200},
        {"method": "POST", "path": "/product/", "json": {"name": "Lamp", "price": 20.5, "stock": 5}, "expected_status": 200},
        {"method": "POST", "path": "/order/", "expected_status": 200,
         "json": {"placed_on": "2024-05-01", "status": "PENDING", "customer": "{{0.customer.id}}"}},
        {"method": "POST", "path": "/orderline/", "expected_status": 200,
         "json": {"quantity": 2, "order": "{{2.order.id}}", "product": "{{1.product.id}}"}},
        {"method": "GET", "path": "/product/{{1.product.id}}/", "expected_status": 200, "expected_fields": {"product.name": "Lamp"}},
        {"method": "PUT", "path": "/customer/{{0.customer.id}}/", "json": {"name": "Ada L", "email": "ada@example.org"},
         "expected_status": 200},
        {"method": "GET", "path": "/orderline/count/", "expected_status": 200, "expected_fields": {"count": 1}},
        {"method": "DELETE", "path": "/orderline/{{3.id}}/", "expected_status": 200},
        {"method": "GET", "path": "/orderline/{{3.id}}/", "expected_status": 404},
    ]


def _clinic() -> list[dict[str, Any]]:
    return [
        {"method": "POST", "path": "/patient/", "json": {"name": "Ada", "phone": "555-1", "birth_date": "1990-02-03"},
         "expected_status": 200},
        {"method": "POST", "path": "/doctor/", "json": {"name": "Dr Who", "phone": "555-2", "specialty": "GENERAL"},
         "expected_status": 200},
        {"method": "POST", "path": "/appointment/", "expected_status": 200,
         "json": {"day": "2024-06-01", "hour": 9, "duration_minutes": 30, "reason": "check-up",
                  "Doctor": "{{1.doctor.id}}", "Patient": "{{0.patient.id}}"}},
        {"method": "GET", "path": "/appointment/", "expected_status": 200, "expected_fields": {"0.reason": "check-up"}},
        {"method": "POST", "path": "/appointment/", "expected_status": [400, 422],
         "json": {"day": "2024-06-01", "hour": 10, "duration_minutes": 5, "reason": "too short",
                  "Doctor": "{{1.doctor.id}}", "Patient": "{{0.patient.id}}"}},
        {"method": "GET", "path": "/doctor/{{1.doctor.id}}/", "expected_status": 200, "expected_fields": {"doctor.name": "Dr Who"}},
        {"method": "DELETE", "path": "/appointment/{{2.id}}/", "expected_status": 200},
        {"method": "GET", "path": "/appointment/{{2.id}}/", "expected_status": 404},
    ]


def _blog() -> list[dict[str, Any]]:
    return [
        {"method": "POST", "path": "/user/", "json": {"username": "ada", "email": "ada@example.org"}, "expected_status": 200},
        {"method": "POST", "path": "/post/", "expected_status": 200,
         "json": {"title": "Hello", "body": "First post", "published": True, "author": "{{0.user.id}}"}},
        {"method": "POST", "path": "/comment/", "expected_status": 200,
         "json": {"text": "Nice", "post": "{{1.post.id}}", "commenter": "{{0.user.id}}"}},
        {"method": "GET", "path": "/post/{{1.post.id}}/", "expected_status": 200, "expected_fields": {"post.title": "Hello"}},
        {"method": "PUT", "path": "/post/{{1.post.id}}/", "expected_status": 200,
         "json": {"title": "Hello again", "body": "Edited", "published": True, "author": "{{0.user.id}}"}},
        {"method": "GET", "path": "/post/count/", "expected_status": 200, "expected_fields": {"count": 1}},
        {"method": "DELETE", "path": "/comment/{{2.id}}/", "expected_status": 200},
        {"method": "GET", "path": "/comment/{{2.id}}/", "expected_status": 404},
    ]


CRUD_SCENARIOS = {"library": _library, "shop": _shop, "clinic": _clinic, "blog": _blog}


def scaffold_crud(model_key: str) -> Check:
    """The scaffold's own create/read/update/delete scenario for ``model_key`` still passes."""
    return http("scaffold_crud_still_passes", "the generated CRUD routes still create, read, update and delete",
                CRUD_SCENARIOS[model_key]())


def baseline(model_key: str) -> tuple[Check, ...]:
    """The checks every task of ``model_key`` carries besides its own."""
    return (GENERATOR_INTACT, scaffold_crud(model_key))
