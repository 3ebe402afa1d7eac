"""The one way a confined process starts: the tier, its launch line (caps included), the scrubbed environment.

Every sandboxed process the server starts comes through ``spawn_confined``: a one-off check
(``oneoff``) and the spare prepared for it (``spares``), the run's persistent shell
(``session``), an ``sh_run`` command (``shtools.runner``) and a long-lived worker (``workers``:
the app host, the import checker). So each gets the same three things, from one owner:

- the tier: the operator's (``require_tier``: refused with ``sandbox_unavailable`` when none
  can start; unconfined only under the operator's explicit ``off``, which ``notes`` then say),
  or the one the caller already resolved;
- the tier's launch line for a ``Confinement`` (bubblewrap or the launcher), which applies the
  resource caps (``resource_caps``: file size, core files, the task cap, the memory limit and
  CPU share of ``shares``), and the ``memory`` watch a caller asks whether that limit stopped it;
- the environment from ``scrub_environment``, the one allowlist: a caller adds explicit extra
  variables (``env``), and secret names among them are still removed;
- the network the confinement names: a private one (``netns``: pasta attached before the
  command starts; or the run's one namespace, joined: ``runnet``) or none or the server's.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox.config import startup_settings
from kernel_ext.sandbox.env import scrub_environment
from kernel_ext.sandbox.netns import Attachment
from kernel_ext.sandbox.nsjoin import Held, SharedNetwork
from kernel_ext.sandbox.shares import NO_WATCH, MemoryWatch
from kernel_ext.sandbox.spec import Confinement
from kernel_ext.sandbox.supervisor import Stream, spawn
from kernel_ext.sandbox.tiers import (
    OFF_WARNING,
    UNAVAILABLE_MESSAGE,
    Tier,
    TierChoice,
    choose_tier,
    launch,
)


@dataclass(frozen=True)
class Confined:
    """A started confined process and how it is confined (``network`` is true whenever the tier is off)."""

    process: subprocess.Popen[bytes]
    tier: Tier
    network: bool
    notes: tuple[str, ...]
    secrets_removed: int
    net_note: str | None = None  # a private network's outbound traffic could not be set up
    held: Held | None = None  # its namespaces, when asked to ``hold`` them (``runnet``)
    memory: MemoryWatch = NO_WATCH  # whether the sandbox's memory limit stopped a command


def require_tier(policy: str | None = None) -> TierChoice:
    """The active tier for ``policy`` (default: the operator's), or the model-safe refusal."""
    choice = choose_tier(policy or startup_settings().policy)
    if not choice.available:
        raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE, UNAVAILABLE_MESSAGE)
    return choice


def spawn_confined(
    argv: Sequence[str],
    conf: Confinement,
    *,
    tier: Tier | None = None,
    policy: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: Stream = subprocess.DEVNULL,
    stdout: Stream = subprocess.PIPE,
    stderr: Stream = subprocess.PIPE,
    cwd: str | os.PathLike[str] | None = None,
    stable: bool = False,
    parked: bool = False,
    shared: SharedNetwork | None = None,
    hold: bool = False,
) -> Confined:
    """Start ``argv`` confined by ``conf`` under ``tier`` (default: ``require_tier(policy)``).

    ``env`` adds variables to the scrubbed environment; ``cwd`` defaults to the confinement's
    working folder. ``stable`` forks from the long-lived spawner thread, so the parent-death
    signal the tiers rely on fires only when the server goes (a process that outlives the
    calling thread needs it). Raises ``ToolFailure(sandbox_unavailable)`` when no tier can
    confine it, ``OSError`` when the sandbox cannot be started. ``parked`` (callers whose three
    streams are pipes): a bwrap launcher parked ahead in the sandbox's task cap runs the command,
    so no cgroup join and no shell hop is on the call's path (``tiers.ParkedLauncher``).
    A private network is ``shared``'s (the run's one namespace, joined) when given, else the sandbox's
    own, its namespaces kept open in ``Confined.held`` when ``hold``.
    """
    if tier is None:
        chosen = require_tier(policy).tier
        assert chosen is not None
        tier = chosen
    private = conf.private_net and tier is Tier.BWRAP
    entry = shared.enter() if private and shared is not None else None
    attach = Attachment.open(hold) if private and entry is None else None
    try:
        ready = launch(tier, conf, argv, parked=parked and attach is None and entry is None,
                       extra_options=attach.bwrap_options() if attach else (), join=entry.argv if entry else ())
    except BaseException:
        if attach:
            attach.close()
        if entry:
            entry.close()
        raise
    net_note, held = (entry.note if entry else None), None
    try:
        if not ready.private_tmp:
            (conf.home / ".tmp").mkdir(parents=True, exist_ok=True)
        scrubbed = scrub_environment(home=str(conf.home), tmpdir=conf.tmpdir(ready.private_tmp), extra=env)
        where = os.fspath(cwd) if cwd is not None else str(conf.working_dir())
        process = ready.start(scrubbed.env) if parked else None
        if process is None:
            process = spawn(ready.argv, stable=stable, stdin=stdin, stdout=stdout, stderr=stderr, env=scrubbed.env, cwd=where,
                            pass_fds=attach.child_fds() if attach else ())
        if entry:
            entry.joined(process)
        if attach:
            attach.started()
            net_note = attach.connect()
            held = attach.held
    finally:
        ready.dismiss()
        if attach:
            attach.close()
        if entry:
            entry.close()
    off = tier is Tier.OFF
    return Confined(process, tier, conf.network or off, (OFF_WARNING,) if off else (), scrubbed.secrets_removed, net_note,
                    held, ready.caps.memory_watch())
