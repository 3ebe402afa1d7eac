"""The fence: roots, descriptor-based no-follow access, atomic publish, version checks,
per-file locks, and walks that never follow a link."""

from kernel_ext.workspace.fence import Identity, Location, Workspace
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
from kernel_ext.workspace.walk import COMMAND_OUTPUT_DIR, Entry, Walker, similar_paths

__all__ = [
    "ANY_VERSION",
    "COMMAND_OUTPUT_DIR",
    "Entry",
    "FileSnapshot",
    "Identity",
    "Location",
    "Published",
    "Walker",
    "Workspace",
    "file_lock",
    "is_temp_name",
    "publish",
    "remove",
    "require_unchanged",
    "sha256_hex",
    "similar_paths",
    "snapshot",
]
