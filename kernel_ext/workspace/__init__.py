"""The fence: roots, descriptor-based no-follow access, atomic publish, version checks."""

from kernel_ext.workspace.fence import Identity, Location, Workspace
from kernel_ext.workspace.publish import ANY_VERSION, Published, publish, remove
from kernel_ext.workspace.versions import FileSnapshot, require_unchanged, snapshot

__all__ = [
    "ANY_VERSION",
    "FileSnapshot",
    "Identity",
    "Location",
    "Published",
    "Workspace",
    "publish",
    "remove",
    "require_unchanged",
    "snapshot",
]
