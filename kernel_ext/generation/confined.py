"""Generators that start processes run whole in a one-off sandbox (host side).

BESSER's SQL generator writes ``sql_alchemy.py`` (the model's method bodies pasted in) and runs
it to dump the DDL; the Django generator runs ``django-admin`` and ``manage.py``. Run on the
host, that is model-derived code with the server's files, network and environment. So a
target marked ``confined`` (``targets.py``; ``tests/security/test_sec_generator_spawn.py``
checks every target whose BESSER modules can start a process is marked) is run by
``confined_worker.py`` through ``run_confined``: the operator's tier, network off, the scrubbed
environment, writes only to the private scratch folder whose ``out/`` the runner then reads
back through descriptors (links, FIFOs and devices left there are never followed or read).

The models reach the worker pickled, host to sandbox only (the host never unpickles what a
sandbox wrote): pickle keeps the model exactly, so the output is byte for byte what an
in-process run gives; the JSON form (``model/jsonform.py``) drops timestamps, and BESSER orders
its output by them. Fail closed: with no tier that can start, the generator is refused
(``sandbox_unavailable``); under the operator's explicit ``off`` it runs unconfined and the
output carries a ``sandbox_off`` finding, like Phase 1's app import (``checks.py``).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.findings import Finding
from kernel_ext.generation.targets import GeneratorSpec, Options

GENERATE_TIMEOUT_S = 300.0
SANDBOX_OFF = "sandbox_off"
_JOB = "job.pickle"


def produce_confined(spec: GeneratorSpec, models: dict[str, Any], scratch: Path, out: Path, options: Options,
                     *, policy: str | None = None, timeout: float = GENERATE_TIMEOUT_S) -> str:
    """Run ``spec`` in a fresh sandbox over ``scratch`` writing into ``out`` (inside it); returns the tier.

    Raises ``ToolFailure``: ``sandbox_unavailable`` (nothing ran), ``timeout``, ``generation_failed``.
    """
    from kernel_ext.sandbox import package_program, run_confined

    job = scratch / _JOB
    try:
        data = pickle.dumps({"target": spec.name, "options": options.model_dump(), "models": models},
                            protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
        raise ToolFailure(ErrorCode.GENERATION_FAILED,
                          f"the model could not be handed to the sandboxed {spec.label} generator: {type(exc).__name__}") from None
    job.write_bytes(data)
    argv = package_program("kernel_ext.generation.confined_worker", str(job), str(out))
    try:
        record = run_confined(argv, scratch, timeout, network=False, cwd=scratch, env={"PYTHONDONTWRITEBYTECODE": "1"},
                              policy=policy, spill_output=False, label=f"BESSER {spec.label} generator")
    except ToolFailure as exc:
        if exc.code == ErrorCode.SANDBOX_UNAVAILABLE:
            raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE,
                              f"BESSER's {spec.label} generator starts processes that run model-derived code, so it runs "
                              f"only in the sandbox, and {exc.message}; nothing ran") from None
        raise
    if record.timed_out:
        raise ToolFailure(ErrorCode.TIMEOUT, f"BESSER's {spec.label} generator did not finish within {timeout:.0f} s")
    if record.exit_code != 0:
        raise ToolFailure(ErrorCode.GENERATION_FAILED, f"BESSER's {spec.label} generator failed: {_why(record.stderr.text)}")
    return str(record.tier)


def off_findings(spec_label: str, tier: str) -> list[Finding]:
    """The named warning when a confined generator ran under the operator's ``off`` tier."""
    from kernel_ext.sandbox import OFF_WARNING, Tier

    if tier != str(Tier.OFF):
        return []
    return [Finding("warning", "phase1.generator", f"BESSER's {spec_label} generator ran unconfined: {OFF_WARNING}",
                    code=SANDBOX_OFF)]


def _why(stderr: str) -> str:
    from kernel_ext.generation.confined_worker import FAILED

    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    named = [ln[len(FAILED):] for ln in lines if ln.startswith(FAILED)]
    return (named[-1] if named else (lines[-1] if lines else "no output"))[:1500]
