"""The run's own files inside a workspace: one list of names, one owner.

A run keeps bookkeeping beside the app it builds (its state, spilled command output, the
runtime probe and the probe's state); none of it is the app. Every tree operation skips these
names: the manifest and the authorship split, Phase 3 snapshots and their digests, the
archive, the shell's change detection, checkpoints and the app's staging copy. The fence's
defaults decide how the file tools see them: ``HIDDEN`` names are neither listed nor opened,
``READ_ONLY`` ones can be read and searched (a result points the model at its spilled output)
but never written, edited or deleted by a tool; only the host writes them.
"""

from __future__ import annotations

RUN_STATE_DIR = ".besser"
COMMAND_OUTPUT_DIR = ".besser_command_output"
PROBE_FILE = ".besser_probe.py"
PROBE_STATE_DIR = ".besser_probe"

HIDDEN: tuple[str, ...] = (RUN_STATE_DIR,)
READ_ONLY: tuple[str, ...] = (COMMAND_OUTPUT_DIR, PROBE_FILE, PROBE_STATE_DIR)
INTERNAL_NAMES: frozenset[str] = frozenset((*HIDDEN, *READ_ONLY))


def is_internal_name(name: str) -> bool:
    """Whether one path component names a run's own file or folder."""
    return name in INTERNAL_NAMES
