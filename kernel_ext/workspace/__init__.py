"""The fence: roots, descriptor-based no-follow access, atomic publish, version checks,
per-file locks, and walks that never follow a link."""

from kernel_ext.workspace.fence import Identity, Location, Workspace
from kernel_ext.workspace.internal import COMMAND_OUTPUT_DIR, INTERNAL_NAMES, PROBE_FILE, is_internal_name
from kernel_ext.workspace.locks import file_lock
from kernel_ext.workspace.publish import (
    ANY_VERSION,
    Published,
    is_temp_name,
    publish,
    remove,
)
from kernel_ext.workspace.versions import (
    FileSnapshot,
    require_unchanged,
    sha256_hex,
    snapshot,
)
from kernel_ext.workspace.walk import Entry, Walker, similar_paths

__all__ = [
    "ANY_VERSION",
    "COMMAND_OUTPUT_DIR",
    "INTERNAL_NAMES",
    "PROBE_FILE",
    "Entry",
    "FileSnapshot",
    "Identity",
    "Location",
    "Published",
    "Walker",
    "Workspace",
    "file_lock",
    "is_internal_name",
    "is_temp_name",
    "publish",
    "remove",
    "require_unchanged",
    "sha256_hex",
    "similar_paths",
    "snapshot",
]
