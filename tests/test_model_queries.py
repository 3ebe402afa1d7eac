"""Model-query tools through the Executor, on the Library model and a 200-class model."""

from __future__ import annotations

import pytest
from model_fixtures import call, executor_for

from kernel_ext.model import build_index, build_library_model, overview, select, synthetic_model
from kernel_ext.model.views import CLASS_BUDGET, OVERVIEW_BUDGET


@pytest.fixture(scope="module")
def library():
    return build_library_model()


@pytest.fixture(scope="module")
def big():
    return synthetic_model(200)


def ask(model, name, arguments):
    result = call(executor_for({"domain_model": model}, allow=()), name, arguments)
    return result


def test_query_class_flattens_inheritance_and_shows_both_ends(library):
    result = ask(library, "query_class", {"name": "Author"})
    assert result.ok, result.observation
    text, data = result.observation, result.data
    assert text.startswith("class Author extends Person")
    assert "name: str  (from Person)" in text and "email: str {optional}  (from Person)" in text
    assert "display_name() -> str  (from Person)" in text and "return self.name.title()" in text
    assert "Writes: Author.books -> Book [0..*]; opposite Book.authors -> Author [1..*]" in text
    assert {m["name"]: m["declared_in"] for m in data["methods"]} == {"display_name": "Person"}
    assert {(a["name"], a["declared_in"]) for a in data["attributes"]} == {
        ("nationality", "Author"), ("name", "Person"), ("email", "Person")}


def test_query_class_book_has_ocl_enum_and_three_associations(library):
    result = ask(library, "query_class", {"name": "book"})  # case-insensitive
    text, data = result.observation, result.data
    assert "genre: Genre  enum: FICTION, HISTORY, POETRY, SCIENCE" in text
    assert "pages_positive (OCL invariant): context Book inv pages_positive: self.pages > 0" in text
    assert "is_long(threshold: int) -> bool" in text
    assert {(e["association"], e["role"], e["target"], e["multiplicity"]) for e in data["associations"]} == {
        ("Writes", "authors", "Author", "1..*"), ("Borrows", "borrower", "Member", "0..1"), ("Stocks", "library", "Library", "1..1")}


def test_inherited_association_ends_and_overrides():
    from besser.BUML.metamodel.structural import BinaryAssociation, Class, DomainModel, Generalization, Method, Multiplicity, Property, StringType

    base, mid, leaf, other = Class(name="Base"), Class(name="Mid"), Class(name="Leaf"), Class(name="Tag")
    base.add_method(Method(name="describe", type=StringType, code="def describe(self):\n    return 'base'\n"))
    mid.add_method(Method(name="describe", type=StringType, code="def describe(self):\n    return 'mid'\n"))
    base.add_attribute(Property(name="label", type=StringType))
    assoc = BinaryAssociation(name="Tagged", ends={
        Property(name="tags", type=other, multiplicity=Multiplicity(0, "*")),
        Property(name="items", type=base, multiplicity=Multiplicity(0, "*"))})
    model = DomainModel(name="Deep", types={base, mid, leaf, other}, associations={assoc},
                        generalizations={Generalization(general=base, specific=mid), Generalization(general=mid, specific=leaf)})
    data = ask(model, "query_class", {"name": "Leaf"}).data
    assert data["ancestors"] == ["Mid", "Base"]
    assert [(m["name"], m["declared_in"]) for m in data["methods"]] == [("describe", "Mid")]  # nearest wins
    assert [(e["role"], e["declared_in"]) for e in data["associations"]] == [("tags", "Base")]
    assert select(build_index(model), "associated_with:Tag") == ["Base", "Leaf", "Mid"]


def test_unknown_class_suggests_names(library):
    result = ask(library, "query_class", {"name": "Bok"})
    assert not result.ok and result.error.code == "not_found" and "Book" in result.error.message
    result = ask(library, "query_class", {"name": "Genre"})
    assert result.error.code == "not_found" and "enumeration" in result.error.message


@pytest.mark.parametrize(
    "predicate, expected",
    [
        ("has_attribute:name", ["Author", "Library", "Member", "Person"]),
        ("type:int", ["Book"]),
        ("type:integer", ["Book"]),
        ("type:Genre", ["Book"]),
        ("has_methods", ["Author", "Book", "Member", "Person"]),
        ("has_method:display_*", ["Author", "Member", "Person"]),
        ("has_constraints", ["Book"]),
        ("associated_with:Book", ["Author", "Library", "Member"]),
        ("extends:Person", ["Author", "Member"]),
        ("is_abstract", ["Person"]),
        ("is_root and not is_abstract", ["Book", "Library"]),
        ("has_methods and not extends:Person & !is_abstract", ["Book"]),
        ("name:*r", ["Author", "Member"]),
        ("has_attribute:nothing", []),
    ],
)
def test_list_classes_with_predicates(library, predicate, expected):
    result = ask(library, "list_classes_with", {"predicate": predicate})
    assert result.ok, result.observation
    assert result.data["classes"] == expected


@pytest.mark.parametrize("predicate, code", [("has_color:red", "invalid_argument"), ("type:", "invalid_argument"),
                                             ("extends:Nobody", "not_found"), ("is_abstract:yes", "invalid_argument")])
def test_bad_predicates_are_named(library, predicate, code):
    result = ask(library, "list_classes_with", {"predicate": predicate})
    assert not result.ok and result.error.code == code
    assert "has_attribute" in result.error.message or code == "not_found"


def test_get_constraints_for_includes_inherited_and_method_conditions():
    from besser.BUML.metamodel.structural import Class, Constraint, DomainModel, Generalization, IntegerType, Method, Property

    parent, child = Class(name="Account"), Class(name="Savings")
    parent.add_attribute(Property(name="balance", type=IntegerType))
    withdraw = Method(name="withdraw", parameters=[], type=IntegerType)
    child.add_method(withdraw)
    withdraw.add_pre(Constraint(name="enough", context=child, expression="context Savings::withdraw() pre: self.balance > 0", language="OCL"))
    model = DomainModel(name="Bank", types={parent, child}, generalizations={Generalization(general=parent, specific=child)},
                        constraints={Constraint(name="non_negative", context=parent, expression="context Account inv: self.balance >= 0", language="OCL")})
    result = ask(model, "get_constraints_for", {"class_name": "Savings"})
    assert result.ok
    kinds = {(c["name"], c["kind"], c["context"]) for c in result.data["constraints"]}
    assert kinds == {("non_negative", "invariant", "Account"), ("enough", "pre", "Savings")}
    assert "(from Account)" in result.observation and "on withdraw()" in result.observation
    assert ask(model, "get_constraints_for", {"class_name": "Account"}).data["constraints"][0]["name"] == "non_negative"
    assert "no OCL" in ask(build_library_model(), "get_constraints_for", {"class_name": "Author"}).observation


def test_validate_model_parses_ocl_against_the_model(library):
    ok = ask(library, "validate_model", {})
    assert ok.ok and ok.data["valid"] is True and ok.data["ocl_checked"] == 1
    from besser.BUML.metamodel.structural import Constraint

    broken = build_library_model()
    book = broken.get_class_by_name("Book")
    broken.add_constraint(Constraint(name="typo", context=book, expression="context Book inv typo: self.pagez > 0", language="OCL"))
    result = ask(broken, "validate_model", {})
    assert result.ok and result.data["valid"] is False
    assert any("typo" in e and "pagez" in e for e in result.data["errors"])


def test_query_tools_are_not_offered_without_a_model(tmp_path):
    from kernel_ext.workspace import Workspace

    executor = executor_for({"workspace": Workspace(tmp_path)}, allow=())
    assert "query_class" not in executor.offered
    result = call(executor, "query_class", {"name": "Book"})
    assert not result.ok and result.error.code == "tool_not_offered"


def test_answers_stay_bounded_on_a_200_class_model(big):
    index = build_index(big)
    assert len(index.classes) == 200
    text = overview(index)
    assert len(text) <= OVERVIEW_BUDGET and "200 classes" in text and "E199" in text
    # A chars/4 estimate is enough to show the overview fits the ~2,000-token budget.
    assert len(text) / 4 < 2000
    executor = executor_for({"domain_model": big}, allow=())
    for name in ("E000", "E013", "E199"):
        result = call(executor, "query_class", {"name": name})
        assert result.ok and len(result.observation) <= CLASS_BUDGET
    listed = call(executor, "list_classes_with", {"predicate": "name:E*"})
    assert listed.data["count"] == 200 and "... and 100 more" in listed.observation
    assert call(executor, "list_classes_with", {"predicate": "extends:E010"}).data["classes"] == ["E011", "E012", "E013"]
    assert call(executor, "validate_model", {}).data["ocl_checked"] == 34


def test_a_huge_class_is_cut_with_a_note():
    from besser.BUML.metamodel.structural import Class, DomainModel, Property, StringType

    wide = Class(name="Wide", attributes={Property(name=f"field_{i:04d}_with_a_long_name", type=StringType) for i in range(1000)})
    result = ask(DomainModel(name="W", types={wide}), "query_class", {"name": "Wide"})
    assert result.ok and len(result.observation) <= CLASS_BUDGET + 100
    assert "more attributes" in result.observation
    assert len(result.data["attributes"]) == 200


def test_index_is_built_once_per_run(library):
    executor = executor_for({"domain_model": library}, allow=())
    call(executor, "query_class", {"name": "Book"})
    cache = executor.context.state.stores["model.index"]
    (first,) = cache.values()
    call(executor, "list_classes_with", {"predicate": "has_methods"})
    assert tuple(cache.values()) == (first,)
