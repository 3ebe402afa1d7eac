"""One door for every form a model comes in, and the checks every loaded model passes.

Forms: a ``DomainModel`` object (what a notebook cell builds), a PlantUML file (BESSER's own
grammar, ``plantuml.py``), a Python file (evaluated safely, ``safe_python.py``), this
project's JSON form (``jsonform.py``) and the shipped examples (``example:library``).
Every model is checked: not a model -> ``not_a_model``; no classes -> ``empty_model``;
BESSER's ``validate()`` fails -> ``invalid_model`` listing its errors. Model files are bounded
(``MAX_MODEL_FILE_BYTES``, and each form's own work bounds): ``too_large``. Loading is
synchronous: a server run calls it in a worker thread (``pipeline/generation.py``).

A file is never waited on (opened non-blocking, a FIFO refused). Given a ``root`` (the server
passes its root folder for REST ``model_path``), the path must lie under it and is opened
through the workspace fence: every component no-follow, so no link leads out
(``outside_workspace``, ``symlink_refused``...). Without one (library, CLI, an in-process magic)
the path is the caller's own choice.
"""

from __future__ import annotations

import keyword
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.model.inheritance import bound_model
from kernel_ext.safetext import article

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

MAX_MODEL_FILE_BYTES = 1024 * 1024  # a 1,000-class model is a few hundred KB in any form
PLANTUML_SUFFIXES = (".plantuml", ".puml", ".pu", ".iuml", ".wsd")
EXAMPLE_PREFIX = "example:"
WHAT = "model file"  # how a refusal names the file


@dataclass(frozen=True)
class LoadedModel:
    """A checked model, where it came from, and what the loader wants a person to know."""

    model: Any
    kind: str  # object | python | plantuml | json | example
    origin: str
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # BESSER validate() warnings


def load(source: object, *, variable: str | None = None, check: bool = True, root: str | os.PathLike[str] | None = None) -> LoadedModel:
    """Load ``source``: a DomainModel, a path (under ``root`` when given), or ``example:<name>``; then check it."""
    loaded = _load_unchecked(source, variable, root)
    if not check:
        return loaded
    warnings = check_model(loaded.model, origin=loaded.origin)
    return LoadedModel(loaded.model, loaded.kind, loaded.origin, loaded.notes, tuple(warnings))


def load_model(source: object, *, variable: str | None = None, root: str | os.PathLike[str] | None = None) -> DomainModel:
    """The checked ``DomainModel`` of ``source`` (see ``load``)."""
    return load(source, variable=variable, root=root).model


def check_model(model: object, *, origin: str = "the model") -> list[str]:
    """Raise ``not_a_model`` / ``empty_model`` / ``invalid_model``; return BESSER's warnings."""
    from besser.BUML.metamodel.structural import DomainModel

    if not isinstance(model, DomainModel):
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"{origin} is {article(type(model).__name__)}, not a B-UML DomainModel")
    bound_model(model, origin=origin)  # before validate() walks all_parents (inheritance.py)
    if not model.get_classes():
        kinds = f" (it has {len(model.types)} other types)" if model.types else ""
        raise ToolFailure(ErrorCode.EMPTY_MODEL, f"{origin} ({model.name!r}) has no classes{kinds}; add at least one Class")
    try:
        result = model.validate(raise_exception=False)
    except Exception as exc:  # noqa: BLE001 - BESSER's validator itself tripped on the model
        raise ToolFailure(ErrorCode.INVALID_MODEL, f"{origin} could not be validated: {type(exc).__name__}: {exc}") from None
    if not result.get("success", False):
        errors = list(result.get("errors", []))
        shown = "; ".join(errors[:5]) + (f" (and {len(errors) - 5} more)" if len(errors) > 5 else "")
        raise ToolFailure(ErrorCode.INVALID_MODEL, f"{origin} fails BESSER's validation: {shown}", {"errors": errors[:50]})
    return list(result.get("warnings", []))


def _load_unchecked(source: object, variable: str | None, root: str | os.PathLike[str] | None = None) -> LoadedModel:
    if isinstance(source, LoadedModel):
        return source
    if isinstance(source, str) and source.startswith(EXAMPLE_PREFIX):
        return _example(source[len(EXAMPLE_PREFIX):])
    if isinstance(source, (str, os.PathLike)):
        return load_file(Path(source), variable=variable, root=root)
    origin = f"the {type(source).__name__} object"
    if hasattr(source, "get_classes") and hasattr(source, "generalizations"):  # a DomainModel: bounded even unchecked
        bound_model(source, origin=origin)
    return LoadedModel(source, "object", origin)


def _example(name: str) -> LoadedModel:
    from kernel_ext.model.examples import EXAMPLES

    if name not in EXAMPLES:
        raise ToolFailure(ErrorCode.NOT_FOUND, f"no example model {name!r}; examples: {', '.join(sorted(EXAMPLES))}")
    return LoadedModel(EXAMPLES[name](), "example", f"example:{name}")


def load_file(path: Path, *, variable: str | None = None, root: str | os.PathLike[str] | None = None) -> LoadedModel:
    """Read a model file (by suffix, else by content) without checking it."""
    text = _decode(path, _read(path, root))
    origin = str(path)
    suffix = path.suffix.lower()
    stripped = text.lstrip("\ufeff \t\r\n")
    if suffix in PLANTUML_SUFFIXES or (suffix not in (".py", ".json") and stripped.startswith("@startuml")):
        from kernel_ext.model.plantuml import parse_plantuml

        result = parse_plantuml(text, default_name=_identifier(path.stem), source=origin)
        return LoadedModel(result.model, "plantuml", origin, tuple(result.notes))
    if suffix == ".json" or (suffix != ".py" and stripped.startswith("{")):
        from kernel_ext.model.jsonform import loads

        return LoadedModel(loads(text), "json", origin)
    if suffix == ".py":
        return _python(text, origin, variable)
    raise ToolFailure(
        ErrorCode.NOT_A_MODEL,
        f"{origin}: cannot tell what kind of model file this is; use .py (B-UML Python), "
        f".plantuml/.puml (PlantUML) or .json (this project's JSON form)",
    )


def _python(text: str, origin: str, variable: str | None) -> LoadedModel:
    from besser.BUML.metamodel.structural import DomainModel

    from kernel_ext.model.safe_python import evaluate_source

    result = evaluate_source(text, source=origin)
    if variable is not None:
        value = result.namespace.get(variable)
        if not isinstance(value, DomainModel):
            raise ToolFailure(ErrorCode.NOT_A_MODEL, f"{origin}: {variable!r} is not a DomainModel defined in the file")
        return LoadedModel(value, "python", origin, tuple(result.skipped))
    found: dict[int, str] = {}
    for name in result.order:
        value = result.namespace[name]
        if isinstance(value, DomainModel):
            found[id(value)] = name
    if not found:
        hint = f" (skipped: {'; '.join(result.skipped[:3])})" if result.skipped else ""
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"{origin} defines no DomainModel at top level{hint}")
    if len(found) > 1:
        names = ", ".join(found.values())
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"{origin} defines several DomainModels ({names}); name the one to use")
    name = next(iter(found.values()))
    return LoadedModel(result.namespace[name], "python", origin, tuple(result.skipped))


def _read(path: Path, root: str | os.PathLike[str] | None) -> bytes:
    """The file's bytes, held like every file a request names (``workspace/named.py``)."""
    from kernel_ext.workspace import named

    return named.read(path, root, what=WHAT, max_bytes=MAX_MODEL_FILE_BYTES)


def locate_model_path(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> tuple[Any, Any]:
    """``(Workspace(root), Location)`` of a model path; ``outside_workspace`` when it is not under ``root``.

    Lexical only (the read walks the fence), so a server can refuse a request before a run exists.
    """
    from kernel_ext.workspace import named

    return named.locate(path, root, WHAT)


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"{str(path)!r} is not UTF-8 text, so not a model file") from None


def _identifier(stem: str) -> str:
    """A model name from a file name that is always an identifier (``names.py``)."""
    cleaned = "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in stem).strip("_")[:40]
    if not cleaned or keyword.iskeyword(cleaned):
        return "DomainModel"
    if cleaned[0].isdigit():
        cleaned = f"Model_{cleaned}"
    return cleaned[0].upper() + cleaned[1:]
