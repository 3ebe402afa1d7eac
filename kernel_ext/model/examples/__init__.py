"""Example models every notebook and test can import (built fresh on each call).

``build_library_model()`` is the reference example (Library, Book, Author, Member, an
abstract Person, a Genre enumeration, methods and an OCL rule); ``library.plantuml`` is the
same domain in PlantUML (with the limits of BESSER's PlantUML grammar: association ends are
named after their classes and method bodies cannot be written). ``synthetic_model(n)``
builds a larger, deterministic model for benchmarks and bounded-answer tests.
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent
LIBRARY_PLANTUML = EXAMPLES_DIR / "library.plantuml"


def build_library_model():
    from kernel_ext.model.examples.library import build_library_model as build

    return build()


def synthetic_model(n_classes: int, name: str | None = None):
    from kernel_ext.model.examples.synthetic import synthetic_model as build

    return build(n_classes, name=name)


EXAMPLES = {"library": build_library_model}

__all__ = ["EXAMPLES", "EXAMPLES_DIR", "LIBRARY_PLANTUML", "build_library_model", "synthetic_model"]
