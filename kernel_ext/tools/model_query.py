"""Model questions for the LLM: one class, a filtered list, constraints, validation.

Read-only tools over the run's ``domain_model`` service. The model is indexed once per run
(``kernel_ext.model.service``), so each answer is a lookup plus a bounded rendering: a
200-class model stays as cheap as a 5-class one, and no answer floods the context.
"""

from __future__ import annotations

from pydantic import Field

from kernel_ext.tools.base import Category, ToolArgs, ToolContext, ToolOutcome, ToolSpec

_REQUIRES = frozenset({"domain_model"})


class QueryClassArgs(ToolArgs):
    name: str = Field(min_length=1, max_length=200, description="the class name (case-insensitive)")


class ListClassesWithArgs(ToolArgs):
    predicate: str = Field(
        min_length=1,
        max_length=500,
        description=(
            "terms joined by 'and', each optionally prefixed with 'not': has_attribute:NAME, type:TYPE, "
            "has_method:NAME, has_methods, has_constraints, associated_with:CLASS, extends:CLASS, "
            "is_abstract, is_root, is_leaf, name:PATTERN (* and ? wildcards)"
        ),
    )


class ConstraintsArgs(ToolArgs):
    class_name: str = Field(min_length=1, max_length=200)


class NoArgs(ToolArgs):
    pass


def _index(ctx: ToolContext):
    from kernel_ext.model.service import model_index

    return model_index(ctx.service("domain_model"), ctx.state)


def query_class(args: QueryClassArgs, ctx: ToolContext) -> ToolOutcome:
    from kernel_ext.model.views import describe_class

    text, data = describe_class(_index(ctx), args.name)
    return ToolOutcome(text, data)


def list_classes_with(args: ListClassesWithArgs, ctx: ToolContext) -> ToolOutcome:
    from kernel_ext.model.predicates import select
    from kernel_ext.model.views import describe_matches

    index = _index(ctx)
    text, data = describe_matches(index, args.predicate, select(index, args.predicate))
    return ToolOutcome(text, data)


def get_constraints_for(args: ConstraintsArgs, ctx: ToolContext) -> ToolOutcome:
    from kernel_ext.model.views import describe_constraints

    text, data = describe_constraints(_index(ctx), args.class_name)
    return ToolOutcome(text, data)


def validate_model(args: NoArgs, ctx: ToolContext) -> ToolOutcome:
    from kernel_ext.model.checks import validate_report

    index = _index(ctx)
    text, data = index.cached(("validate",), lambda: validate_report(index.model))
    return ToolOutcome(text, data)


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="query_class",
        category=Category.READ,
        args_model=QueryClassArgs,
        description=(
            "Describe one class of the domain model: attributes (types, multiplicities, inherited ones marked), "
            "methods with inherited ones flattened, association ends seen from both sides, and OCL constraints."
        ),
        run=query_class,
        requires=_REQUIRES,
    ),
    ToolSpec(
        name="list_classes_with",
        category=Category.READ,
        args_model=ListClassesWithArgs,
        description=(
            "List the classes matching a predicate, e.g. 'has_attribute:title', 'type:int', 'has_methods', "
            "'has_constraints', 'associated_with:Book', 'extends:Person and not is_abstract'."
        ),
        run=list_classes_with,
        requires=_REQUIRES,
    ),
    ToolSpec(
        name="get_constraints_for",
        category=Category.READ,
        args_model=ConstraintsArgs,
        description="The OCL constraints that apply to a class (its own invariants, inherited ones, and method pre/postconditions).",
        run=get_constraints_for,
        requires=_REQUIRES,
    ),
    ToolSpec(
        name="validate_model",
        category=Category.READ,
        args_model=NoArgs,
        description="Validate the domain model with BESSER's validator and parse every OCL constraint against it.",
        run=validate_model,
        requires=_REQUIRES,
    ),
)
