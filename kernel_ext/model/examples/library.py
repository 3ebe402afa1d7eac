"""The Library model: the example every notebook and test uses.

Covers what the tools and generators must handle: an abstract parent with a method that
its children inherit (Person -> Author, Member), an enumeration (Genre), three
associations with different multiplicities, a method with a body, and an OCL invariant
(``pages > 0``) that BESSER's FastAPI generator turns into a request validator.
"""

from __future__ import annotations


def build_library_model():
    """A fresh ``DomainModel`` (B-UML objects are mutable, so never share one)."""
    from besser.BUML.metamodel.structural import (
        BinaryAssociation,
        BooleanType,
        Class,
        Constraint,
        DateType,
        DomainModel,
        Enumeration,
        EnumerationLiteral,
        Generalization,
        IntegerType,
        Method,
        Multiplicity,
        Parameter,
        Property,
        StringType,
    )

    genre = Enumeration(
        name="Genre",
        literals={EnumerationLiteral(name=n) for n in ("FICTION", "SCIENCE", "HISTORY", "POETRY")},
    )
    person = Class(
        name="Person",
        is_abstract=True,
        attributes={
            Property(name="name", type=StringType),
            Property(name="email", type=StringType, is_optional=True),
        },
    )
    person.add_method(
        Method(
            name="display_name",
            type=StringType,
            code="def display_name(self):\n    return self.name.title()\n",
        )
    )
    author = Class(name="Author", attributes={Property(name="nationality", type=StringType)})
    member = Class(
        name="Member",
        attributes={Property(name="member_since", type=DateType), Property(name="active", type=BooleanType)},
    )
    library = Class(
        name="Library",
        attributes={Property(name="name", type=StringType), Property(name="address", type=StringType)},
    )
    book = Class(
        name="Book",
        attributes={
            Property(name="isbn", type=StringType),
            Property(name="title", type=StringType),
            Property(name="pages", type=IntegerType),
            Property(name="genre", type=genre),
        },
    )
    book.add_method(
        Method(
            name="is_long",
            parameters=[Parameter(name="threshold", type=IntegerType)],
            type=BooleanType,
            code="def is_long(self, threshold):\n    return self.pages > threshold\n",
        )
    )
    writes = BinaryAssociation(
        name="Writes",
        ends={
            Property(name="authors", type=author, multiplicity=Multiplicity(1, "*")),
            Property(name="books", type=book, multiplicity=Multiplicity(0, "*")),
        },
    )
    borrows = BinaryAssociation(
        name="Borrows",
        ends={
            Property(name="borrower", type=member, multiplicity=Multiplicity(0, 1)),
            Property(name="loans", type=book, multiplicity=Multiplicity(0, "*")),
        },
    )
    stocks = BinaryAssociation(
        name="Stocks",
        ends={
            Property(name="library", type=library, multiplicity=Multiplicity(1, 1)),
            Property(name="holdings", type=book, multiplicity=Multiplicity(0, "*")),
        },
    )
    return DomainModel(
        name="Library",
        types={genre, person, author, member, library, book},
        associations={writes, borrows, stocks},
        generalizations={
            Generalization(general=person, specific=author),
            Generalization(general=person, specific=member),
        },
        constraints={
            Constraint(
                name="pages_positive",
                context=book,
                expression="context Book inv pages_positive: self.pages > 0",
                language="OCL",
            )
        },
    )
