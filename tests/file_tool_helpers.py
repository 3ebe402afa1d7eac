"""Shared helpers for the workspace and file-tool tests: a real Executor over a real folder."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_ext.boundary import (
    ExecutionPolicy,
    Executor,
    ToolCall,
    ToolResult,
    always_approve,
)
from kernel_ext.tools import files_edit, files_read, files_write, syntax
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace import Workspace

FILE_TOOLS = ToolCatalog([*files_read.TOOLS, *files_edit.TOOLS, *files_write.TOOLS, *syntax.TOOLS])


def tree_state(*roots: Path) -> dict[str, Any]:
    """Every entry under ``roots``, byte for byte: file bytes and modes, link texts, dirs, FIFOs."""
    state: dict[str, Any] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in sorted(dirnames + filenames):
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    state[path] = ("link", os.readlink(path))
                elif stat.S_ISREG(st.st_mode):
                    state[path] = ("file", Path(path).read_bytes(), stat.S_IMODE(st.st_mode))
                elif stat.S_ISDIR(st.st_mode):
                    state[path] = ("dir",)
                else:
                    state[path] = ("special", stat.S_IFMT(st.st_mode))
    return state


@dataclass
class Harness:
    """One run: a workspace, an Executor allowing edits with an always-yes host approver."""

    root: Path
    approver: Any = always_approve
    observer: Any = None
    context: ToolContext = field(init=False)
    executor: Executor = field(init=False)
    count: int = 0

    def __post_init__(self) -> None:
        self.context = ToolContext(services={"workspace": Workspace(self.root)})
        self.executor = Executor(
            FILE_TOOLS,
            self.context,
            policy=ExecutionPolicy.allowing(["edit"]),
            approver=self.approver,
            observer=self.observer,
        )

    def call(self, name: str, **arguments: Any) -> ToolResult:
        self.count += 1
        return self.executor.execute_sync(ToolCall(f"t{self.count}", name, arguments))

    def read(self, path: str, **extra: Any) -> str:
        result = self.call("read_file", path=path, **extra)
        assert result.ok, result.observation
        return result.data["read_id"]

    def refused(self, code: str, name: str, *outside: Path, **arguments: Any) -> ToolResult:
        """Call, and assert it was refused with ``code`` and that nothing changed on disk."""
        before = tree_state(self.root, *outside)
        result = self.call(name, **arguments)
        assert not result.ok, result.observation
        assert result.error is not None and result.error.code == code, result.observation
        assert tree_state(self.root, *outside) == before, "a refusal changed the disk"
        return result
