"""Long-lived confined processes the server talks to over pipes (the app host, the import guard).

``run_confined`` (``oneoff``) runs one command that ends; a *worker* stays up and answers
framed requests on its stdin/stdout. Both start the same way, and only here: the operator's
tier (``require_tier``: refused with ``sandbox_unavailable`` when it cannot start, unconfined
only under the operator's explicit ``off``, which the worker's ``notes`` then say), the tier's
launch line for a ``Confinement``, and the scrubbed environment every sandboxed command gets.
Code outside this package never spawns a process that executes project code any other way
(``tests/security/test_sec_spawn_walk.py`` holds the line).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from kernel_ext.sandbox.env import scrub_environment
from kernel_ext.sandbox.oneoff import require_tier
from kernel_ext.sandbox.spec import Confinement
from kernel_ext.sandbox.supervisor import release, spawn
from kernel_ext.sandbox.tiers import OFF_WARNING, Tier, launch


@dataclass(frozen=True)
class Worker:
    """A started worker: its process (stdin and stdout are pipes) and how it is confined."""

    process: subprocess.Popen
    tier: Tier
    network: bool
    notes: tuple[str, ...]


def start_worker(
    argv: Sequence[str],
    conf: Confinement,
    *,
    policy: str | None = None,
    env: Mapping[str, str] | None = None,
    stderr: int | IO[bytes] | None = subprocess.DEVNULL,
) -> Worker:
    """Start ``argv`` confined by ``conf`` under the operator's tier (or ``policy``).

    Forked from the long-lived spawner thread, so the parent-death signal the tiers rely on
    fires only when the server goes. ``env`` adds variables (secret names are still removed).
    Raises ``ToolFailure(sandbox_unavailable)`` when no tier can confine it, ``OSError`` when
    the sandbox cannot be started.
    """
    choice = require_tier(policy)
    assert choice.tier is not None
    ready = launch(choice.tier, conf, argv)
    if not ready.private_tmp:
        (conf.home / ".tmp").mkdir(parents=True, exist_ok=True)
    scrubbed = scrub_environment(home=str(conf.home), tmpdir=conf.tmpdir(ready.private_tmp), extra=env)
    process = spawn(ready.argv, stable=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                    env=scrubbed.env, cwd=str(conf.working_dir()))
    off = choice.tier is Tier.OFF
    return Worker(process, choice.tier, conf.network or off, (OFF_WARNING,) if off else ())


def stop_worker(process: subprocess.Popen) -> None:
    """Kill a worker's whole tree (children it forked included), close our pipe ends, reap it."""
    release(process, kill=True)
