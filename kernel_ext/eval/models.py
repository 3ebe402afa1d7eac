"""The evaluation's domain models, each in a form a person writes, loaded by the normal loaders.

- ``library``: the shipped example (B-UML objects; an abstract parent, an enumeration, an OCL rule);
- ``shop``: JSON (customers, orders, order lines, products with stock; an enumeration, two OCL rules);
- ``clinic``: PlantUML (appointments between patients and doctors; inheritance and an enumeration);
- ``blog``: B-UML Python (users, posts, comments).

Every load goes through ``kernel_ext.model.loading.load_model`` (the checks a user's model gets),
and each call builds a fresh model: B-UML objects are mutable, so none is shared between runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from besser.BUML.metamodel.structural import DomainModel

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class EvalModel:
    """A model of the suite: its key, the form it is written in, and where it comes from."""

    key: str
    form: str  # "example" | "json" | "plantuml" | "python"
    source: str  # what ``load_model`` is given: a path or ``example:<name>``
    shape: str  # one line on what makes this model's shape different

    def load(self) -> DomainModel:
        from kernel_ext.model.loading import load_model

        return load_model(self.source)


MODELS: dict[str, EvalModel] = {
    m.key: m
    for m in (
        EvalModel("library", "example", "example:library", "an abstract parent, an enumeration, N:M and 0..1 ends, an OCL rule"),
        EvalModel("shop", "json", str(DATA / "shop.json"), "orders with lines referring to products with stock; two OCL rules"),
        EvalModel("clinic", "plantuml", str(DATA / "clinic.plantuml"),
                  "appointments between two subclasses of an abstract Person; an enumeration"),
        EvalModel("blog", "python", str(DATA / "blog.py"), "three classes, one of them referenced twice"),
    )
}


def eval_model(key: str) -> EvalModel:
    try:
        return MODELS[key]
    except KeyError:
        raise KeyError(f"no evaluation model {key!r}; known: {', '.join(sorted(MODELS))}") from None
