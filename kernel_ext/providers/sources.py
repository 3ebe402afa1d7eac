"""The file a provider spec names: ``replay:CASSETTE`` and ``scripted:FILE``, held like a model path.

``replay:NAME`` is first a cassette shipped with the package (``SHIPPED``, by name, no ``/``), else
a file; ``scripted:FILE`` a file. A file is read through ``workspace/named.py``: under ``root`` when
the server hosts the run (a REST body, a magic through the server), else the caller's own path;
regular only, never waited on, at most ``MAX_SOURCE_BYTES``. ``source_of`` says which file a spec
names and where it is held (nothing is opened); ``read_source`` reads it (off the event loop).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FILE_KINDS", "MAX_SOURCE_BYTES", "SHIPPED", "Source", "read_source", "shipped_cassette", "source_of"]

FILE_KINDS = ("replay", "scripted")
# the shipped cassettes, beside the authored scenario that plays them (scenarios/library_jwt.py)
SHIPPED = Path(__file__).resolve().parent.parent / "scenarios" / "data"
# what an export keeps of a run's turns (hosting/export/record.py) must replay: the same bound
MAX_SOURCE_BYTES = 64 * 1024 * 1024
WHAT = {"replay": "cassette", "scripted": "script"}


@dataclass(frozen=True)
class Source:
    """A file a spec names: the path, the root it is held under (None: the caller's own), its kind."""

    kind: str
    path: str
    root: str | None

    @property
    def what(self) -> str:
        return WHAT[self.kind]


def shipped_cassette(name: str) -> Path | None:
    """A cassette shipped with the package, by name (``replay:library-jwt``)."""
    if not name or "/" in name or name.startswith("."):
        return None
    candidate = SHIPPED / f"{name}.cassette.jsonl"
    return candidate if candidate.is_file() else None


def source_of(spec: str | None, root: str | os.PathLike[str] | None) -> Source | None:
    """The file ``spec`` names (None: a live provider, ``none``, or a kind with no file given)."""
    kind, _, path = (spec or "").partition(":")
    if kind not in FILE_KINDS or not path:
        return None
    shipped = shipped_cassette(path) if kind == "replay" else None
    if shipped is not None:
        return Source(kind, shipped.name, str(SHIPPED))
    return Source(kind, path, None if root is None else os.fspath(root))


def read_source(source: Source) -> str:
    """The file's text; a refusal is a ``ToolFailure`` naming the file and why."""
    from kernel_ext.errors import ErrorCode, ToolFailure
    from kernel_ext.workspace import named

    data = named.read(source.path, source.root, what=source.what, max_bytes=MAX_SOURCE_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolFailure(ErrorCode.NOT_CONFIGURED, f"{source.what} {source.path!r} is not UTF-8 text") from None
