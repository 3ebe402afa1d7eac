"""Method bodies a model carries: code that BESSER pastes into the generated app.

A JSON or safe-Python model file can give a method a body (``Method.code``); BESSER's
SQLAlchemy generator writes it into the class body of ``sql_alchemy.py`` and its backend
generator into the routers, so it runs when the app is imported. Such code is shown to a
person before it enters generated code (``pipeline/method_bodies.py``); this module says
which bodies a model has, which of them are this package's own (the shipped examples'
bodies, reviewed with the package, need no card), and builds the copy without them.

The operator's ``BESSER_MODEL_METHOD_BODIES`` decides: ``ask`` (the default: a card) or
``off`` (never: every method is generated as a stub). A request or a model cannot turn
bodies on; an unknown value is ``ask``.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

MODES = ("ask", "off")
ENV = "BESSER_MODEL_METHOD_BODIES"


@dataclass(frozen=True)
class MethodBody:
    owner: str  # the class
    method: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.owner}.{self.method}"


def method_mode(value: str | None) -> str:
    """The operator's setting, read like the other operator flags: ``off`` or ``ask``."""
    text = (value or "").strip().lower()
    return "off" if text in ("off", "0", "false", "no", "never", "stub", "stubs") else "ask"


def model_bodies(model: DomainModel) -> list[MethodBody]:
    """Every method of ``model`` with a body, sorted (class, method)."""
    found = []
    for cls in model.get_classes():
        for method in cls.methods:
            code = getattr(method, "code", "") or ""
            if code.strip():
                found.append(MethodBody(str(cls.name), str(method.name), code))
    return sorted(found, key=lambda b: (b.owner, b.method, b.code))


def foreign_bodies(model: DomainModel) -> list[MethodBody]:
    """The bodies that are not this package's own example code: these need a person's yes."""
    own = _shipped_code()
    return [body for body in model_bodies(model) if body.code not in own]


def without_bodies(model: DomainModel, bodies: list[MethodBody]) -> DomainModel:
    """A copy of ``model`` whose listed methods have no body (stubs); the original is untouched."""
    from besser.BUML.metamodel.structural import MethodImplementationType

    stripped = copy.deepcopy(model)
    drop = {(b.owner, b.method) for b in bodies}
    for cls in stripped.get_classes():
        for method in cls.methods:
            if (str(cls.name), str(method.name)) in drop:
                method.code = ""
                if method.implementation_type in (MethodImplementationType.CODE, MethodImplementationType.BAL):
                    method.implementation_type = MethodImplementationType.NONE
    return stripped


def listing(bodies: list[MethodBody]) -> str:
    """The bodies as a card shows them: each method's code, every line marked as added."""
    blocks = []
    for body in bodies:
        lines = "\n".join(f"+{line}" for line in body.code.rstrip("\n").splitlines())
        blocks.append(f"--- method {body.where} (from the model)\n{lines}")
    return "\n".join(blocks)


@functools.cache
def _shipped_code() -> frozenset[str]:
    from kernel_ext.model.examples import EXAMPLES, synthetic_model

    models = [build() for build in EXAMPLES.values()] + [synthetic_model(3)]
    return frozenset(body.code for model in models for body in model_bodies(model))
