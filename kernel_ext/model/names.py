"""Names are identifiers before they are code: the one check every path into Phase 1 passes.

BESSER's generators paste model names into Python source (SQLAlchemy classes and columns,
Pydantic models, FastAPI routes and router modules), into table names and into the
database URL (the model name). A name that is not a plain identifier there (a newline, a
quote, a keyword, a leading digit) either breaks the generated app or writes model text into
code. So before any generator runs, every class, attribute, method, parameter, association,
association end, enumeration, literal and constraint name, and the model name, must be an
ASCII identifier: a letter first, then letters, digits or ``_``; not a Python keyword; at
most ``MAX_NAME_CHARS`` (PostgreSQL's limit for a table or column name). ASCII only, because
Python folds non-ASCII identifiers (NFKC) so two distinct model names can become one.

``check_names`` raises ``invalid_name`` naming the first offending element and what to do;
``name_problems`` lists them all (bounded). BESSER itself refuses spaces and hyphens; this
closes the rest of the family.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernel_ext.errors import ErrorCode, ToolFailure

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

MAX_NAME_CHARS = 63
MAX_REPORTED = 20
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
FIX = (f"rename it to a Python identifier: ASCII letters, digits and '_', starting with a letter, "
       f"not a Python keyword, at most {MAX_NAME_CHARS} characters")


@dataclass(frozen=True)
class NameProblem:
    element: str  # "attribute of class Book"
    name: Any
    why: str

    def line(self) -> str:
        return f"{self.element} {shown(self.name)}: {self.why}; {FIX}"


def shown(name: Any, limit: int = 40) -> str:
    """A name as a person can read it in one line: quoted, control characters escaped, cut."""
    if not isinstance(name, str):
        return f"<{type(name).__name__}>"
    cut = name[:limit]
    text = "".join(ch if ch.isprintable() and ch.isascii() else _escape(ch) for ch in cut)
    return f"'{text}'" + (f" (+{len(name) - limit} characters)" if len(name) > limit else "")


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def identifier_problem(name: Any) -> str | None:
    """Why ``name`` cannot be pasted into generated code, or None when it can."""
    if not isinstance(name, str) or not name:
        return "the name is empty" if name == "" else "the name is not text"
    if len(name) > MAX_NAME_CHARS:
        return f"the name is {len(name)} characters long"
    for ch in name:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn") or ch in "\u2028\u2029":
            return f"the name contains the control character U+{ord(ch):04X}"
    if not name.isascii():
        return "the name contains non-ASCII characters"
    if not _IDENTIFIER.match(name):
        return "the name starts with a digit" if name[0].isdigit() else (
            "the name starts with '_'" if name[0] == "_" else "the name contains characters other than letters, digits and '_'")
    if keyword.iskeyword(name):
        return "the name is a Python keyword"
    return None


def name_problems(model: DomainModel) -> list[NameProblem]:
    """Every name of ``model`` that is not an identifier (at most ``MAX_REPORTED``)."""
    problems: list[NameProblem] = []
    for element, name in _names(model):
        why = identifier_problem(name)
        if why is not None:
            problems.append(NameProblem(element, name, why))
            if len(problems) >= MAX_REPORTED:
                break
    return problems


def check_names(model: DomainModel, *, origin: str = "the model") -> None:
    """Refuse (``invalid_name``) a model with a name that is not an identifier; one line per problem."""
    problems = name_problems(model)
    if not problems:
        return
    more = f" (and {len(problems) - 1} more names)" if len(problems) > 1 else ""
    raise ToolFailure(
        ErrorCode.INVALID_NAME,
        f"{origin}: {problems[0].line()}{more}",
        {"problems": [p.line() for p in problems]},
    )


def check_identifier(name: Any, element: str) -> None:
    """One name on its own (e.g. PlantUML's ``@startuml NAME``)."""
    why = identifier_problem(name)
    if why is not None:
        line = NameProblem(element, name, why).line()
        raise ToolFailure(ErrorCode.INVALID_NAME, line, {"problems": [line]})


def _names(model: DomainModel) -> Iterator[tuple[str, Any]]:
    from besser.BUML.metamodel.structural import Class, Enumeration

    yield "the model name", getattr(model, "name", None)
    for t in _sorted(getattr(model, "types", ())):
        if isinstance(t, Enumeration):
            yield "enumeration", t.name
            for literal in _sorted(t.literals):
                yield f"literal of enumeration {_plain(t.name)}", literal.name
        elif isinstance(t, Class):
            yield "class", t.name
            for attribute in _sorted(t.attributes):
                yield f"attribute of class {_plain(t.name)}", attribute.name
            for method in _sorted(t.methods):
                yield f"method of class {_plain(t.name)}", method.name
                for parameter in method.parameters:
                    yield f"parameter of method {_plain(t.name)}.{_plain(method.name)}", parameter.name
    for association in _sorted(getattr(model, "associations", ())):
        yield "association", association.name
        for end in _sorted(association.ends):
            yield f"end of association {_plain(association.name)}", end.name
    for constraint in _sorted(getattr(model, "constraints", ())):
        yield "constraint", constraint.name


def _sorted(items: Any) -> list[Any]:
    return sorted(items or (), key=lambda item: str(getattr(item, "name", "")))


def _plain(name: Any) -> str:
    return shown(name, 30).strip("'")
