"""A deterministic model of any size, for benchmarks and bounded-answer tests.

Classes come in groups of ten: ``E{g}0`` is an abstract base with a method, ``E{g}1`` to
``E{g}3`` specialise it, the rest are plain. Attribute types, methods, OCL invariants and
associations vary with the index so every predicate of ``list_classes_with`` has matches.
All association ends are optional, so the generated API can create every class.
"""

from __future__ import annotations


def synthetic_model(n_classes: int, name: str | None = None):
    from besser.BUML.metamodel.structural import (
        BinaryAssociation,
        BooleanType,
        Class,
        Constraint,
        DateType,
        DomainModel,
        Enumeration,
        EnumerationLiteral,
        FloatType,
        Generalization,
        IntegerType,
        Method,
        Multiplicity,
        Parameter,
        Property,
        StringType,
    )

    if n_classes < 1:
        raise ValueError("a synthetic model needs at least one class")
    status = Enumeration(name="Status", literals={EnumerationLiteral(name=n) for n in ("NEW", "OPEN", "DONE")})
    classes: list = []
    generalizations: set = set()
    constraints: set = set()
    for i in range(n_classes):
        cname = f"E{i:03d}"
        if i % 10 == 0:
            cls = Class(
                name=cname,
                is_abstract=True,
                attributes={Property(name="label", type=StringType), Property(name="created", type=DateType)},
            )
            cls.add_method(Method(name="describe", type=StringType, code="def describe(self):\n    return self.label\n"))
        else:
            attrs = {Property(name="title", type=StringType)}
            if i % 2:
                attrs.add(Property(name="count", type=IntegerType))
            if i % 3 == 0:
                attrs.add(Property(name="amount", type=FloatType))
            if i % 5 == 0:
                attrs.add(Property(name="active", type=BooleanType))
            if i % 6 == 0:
                attrs.add(Property(name="status", type=status))
            cls = Class(name=cname, attributes=attrs)
            if i % 5 == 2:
                cls.add_method(
                    Method(
                        name="recompute",
                        parameters=[Parameter(name="factor", type=IntegerType)],
                        type=FloatType,
                        code="def recompute(self, factor):\n    return float(factor)\n",
                    )
                )
            if i % 2 and i % 3 == 1:
                constraints.add(
                    Constraint(
                        name=f"{cname.lower()}_count_nonneg",
                        context=cls,
                        expression=f"context {cname} inv: self.count >= 0",
                        language="OCL",
                    )
                )
            if i % 10 in (1, 2, 3) and i - i % 10 < len(classes):
                generalizations.add(Generalization(general=classes[i - i % 10], specific=cls))
        classes.append(cls)

    associations: set = set()
    for i, cls in enumerate(classes):
        j = i - 1 if i % 10 >= 4 else i - 10 if i % 10 == 0 else None
        if j is None or j < 0:
            continue
        other = classes[j]
        many = i % 10 == 7
        associations.add(
            BinaryAssociation(
                name=f"L{other.name}_{cls.name}",
                ends={
                    Property(name=other.name.lower(), type=other, multiplicity=Multiplicity(0, "*" if many else 1)),
                    Property(name=f"{cls.name.lower()}s", type=cls, multiplicity=Multiplicity(0, "*")),
                },
            )
        )
    return DomainModel(
        name=name or f"Synthetic{n_classes}",
        types={status, *classes},
        associations=associations,
        generalizations=generalizations,
        constraints=constraints,
    )
