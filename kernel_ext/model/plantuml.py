"""PlantUML in, through BESSER's own grammar and listener, with errors that are not lost.

BESSER's ``plantuml_to_buml`` lets ANTLR print syntax errors to stderr and recover, so a file
that is not a model can come back as an empty or half-built ``DomainModel``. Here the same
lexer, parser and listener run with an error listener that collects every syntax error and
refuses the file with ``not_a_model`` naming the first ones.

Two conveniences BESSER's grammar lacks, handled before parsing (line numbers are kept):
``@startuml Name`` names the model (it must be an identifier, ``names.py``), and PlantUML comment lines (``'``) are dropped, except
``' OCL: context Book inv name: expr`` lines, which become OCL constraints on the model.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.model.names import check_identifier

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

_START = re.compile(r"^\s*@startuml\b[ \t]*(?P<name>[^\s]*)\s*$")
_OCL_LINE = re.compile(r"^\s*'\s*OCL\s*:\s*(?P<expr>.+?)\s*$", re.IGNORECASE)
_OCL_HEAD = re.compile(r"^context\s+(?P<ctx>[A-Za-z_]\w*)\s+inv\s*(?P<name>[A-Za-z_]\w*)?\s*:", re.IGNORECASE)
_MAX_REPORTED = 5


@dataclass
class PlantUMLResult:
    model: Any
    notes: list[str] = field(default_factory=list)


def preprocess(text: str) -> tuple[str, str | None, list[tuple[int, str]]]:
    """``(cleaned text, @startuml name, [(line, OCL expression)])`` with line numbers kept."""
    cleaned, name, ocl = [], None, []
    for number, line in enumerate(text.splitlines(), 1):
        start = _START.match(line)
        if start:
            name = start.group("name") or None
            cleaned.append("@startuml")
            continue
        rule = _OCL_LINE.match(line)
        if rule:
            ocl.append((number, rule.group("expr")))
            cleaned.append("")
        elif line.lstrip().startswith("'"):
            cleaned.append("")
        else:
            cleaned.append(line)
    return "\n".join(cleaned) + "\n", name, ocl


def parse_plantuml(text: str, *, default_name: str = "DomainModel", source: str = "PlantUML") -> PlantUMLResult:
    """A ``DomainModel`` from PlantUML text; syntax errors are ``not_a_model``, bad references ``invalid_model``."""
    if "@startuml" not in text:
        raise ToolFailure(ErrorCode.NOT_A_MODEL, f"{source} has no '@startuml' ... '@enduml' block")
    cleaned, name, ocl = preprocess(text)
    if name is not None:  # it becomes the model name, pasted into generated code (the database URL)
        check_identifier(name, f"{source}: the '@startuml' name")

    from antlr4 import CommonTokenStream, InputStream, ParseTreeWalker
    from antlr4.error.ErrorListener import ErrorListener
    from besser.BUML.notations.structuralPlantUML.plantUML_buml_listener import BUMLGenerationListener
    from besser.BUML.notations.structuralPlantUML.PlantUMLLexer import PlantUMLLexer
    from besser.BUML.notations.structuralPlantUML.PlantUMLParser import PlantUMLParser

    class _Collect(ErrorListener):
        def __init__(self) -> None:
            self.errors: list[str] = []

        def syntaxError(self, recognizer, offending, line, column, msg, e):  # noqa: N802 (ANTLR's name)
            self.errors.append(f"line {line}:{column} {msg}")

    collected = _Collect()
    lexer = PlantUMLLexer(InputStream(cleaned))
    lexer.removeErrorListeners()
    lexer.addErrorListener(collected)
    parser = PlantUMLParser(CommonTokenStream(lexer))
    parser.removeErrorListeners()
    parser.addErrorListener(collected)
    try:
        tree = parser.domainModel()
    except (RecursionError, MemoryError) as exc:
        raise ToolFailure(ErrorCode.TOO_LARGE, f"{source} needs more than a model file may use to parse ({type(exc).__name__})") from None
    if collected.errors:
        shown = "; ".join(collected.errors[:_MAX_REPORTED])
        more = f" (and {len(collected.errors) - _MAX_REPORTED} more)" if len(collected.errors) > _MAX_REPORTED else ""
        raise ToolFailure(
            ErrorCode.NOT_A_MODEL,
            f"{source} is not a model BESSER's PlantUML grammar accepts: {shown}{more}",
            {"syntax_errors": collected.errors[:50]},
        )
    _check_inheritance(tree, PlantUMLParser, source)
    listener = BUMLGenerationListener()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ParseTreeWalker().walk(listener, tree)
        except ValueError as exc:
            raise ToolFailure(ErrorCode.INVALID_MODEL, f"{source}: {exc}") from None
        except (RecursionError, MemoryError) as exc:
            raise ToolFailure(ErrorCode.TOO_LARGE, f"{source} needs more than a model file may use ({type(exc).__name__})") from None
        except AttributeError:
            raise ToolFailure(
                ErrorCode.INVALID_MODEL,
                f"{source}: a relationship or type names a class that is not declared",
            ) from None
    model = listener.get_buml_model()
    try:
        model.name = name or default_name
    except ValueError as exc:  # BESSER's own name rules (spaces, hyphens)
        raise ToolFailure(ErrorCode.INVALID_NAME, f"{source}: the model name: {exc}") from None
    _add_ocl(model, ocl, source)
    return PlantUMLResult(model, [str(w.message) for w in caught])


def _check_inheritance(tree: Any, parser_class: Any, source: str) -> None:
    """Bound the inheritance the parse tree states (``extends`` and ``<|--``) before BESSER's listener builds it."""
    from kernel_ext.model.inheritance import bound_names

    edges: list[tuple[str, str]] = []
    stack = [tree]
    while stack:  # iterative: the tree's depth is the file's, not Python's stack
        node = stack.pop()
        if isinstance(node, parser_class.ClassContext) and node.extends() is not None:
            edges.append((node.ID().getText(), node.extends().ID().getText()))
        elif isinstance(node, parser_class.InheritanceContext):
            first, second = node.ID(0).getText(), node.ID(1).getText()
            edges.append((second, first) if node.inh_left else (first, second))
        stack.extend(getattr(node, "children", None) or ())
    bound_names(edges, origin=source)


def _add_ocl(model: DomainModel, rules: list[tuple[int, str]], source: str) -> None:
    from besser.BUML.metamodel.structural import Constraint

    for index, (line, expression) in enumerate(rules, 1):
        head = _OCL_HEAD.match(expression)
        if head is None:
            raise ToolFailure(
                ErrorCode.INVALID_MODEL,
                f"{source} line {line}: an OCL comment must read 'context <Class> inv [name]: <expression>'",
            )
        context = model.get_class_by_name(head.group("ctx"))
        if context is None:
            raise ToolFailure(ErrorCode.INVALID_MODEL, f"{source} line {line}: OCL context class {head.group('ctx')!r} is not declared")
        rule_name = head.group("name") or f"{context.name.lower()}_inv{index}"
        model.add_constraint(Constraint(name=rule_name, context=context, expression=expression, language="OCL"))
