"""A model as Python that rebuilds it: BESSER's own code builder, checked by this project's loader.

An exported run shows its model as a B-UML Python script a reader can run (and edit). BESSER
writes the script (``domain_model_to_code``); the text is then evaluated by ``safe_python``
(the evaluator every model file goes through) and must define one ``domain_model`` whose digest
equals the model's, with no statement skipped. A script that fails the check is never handed
out (``ModelCodeUnfaithful``): the caller falls back to the JSON form, so what a reader runs is
what the run used, and nothing in the script is anything but model-building calls. A run keeps
its model's script (``unchecked_code``) when it starts; it is checked when it is handed out, and
a script importing anything but BESSER is refused (the safe loader ignores such an import; Python
would run it), and a stored script must equal the builder's text for the model it defines (an
annotation the loader never evaluates would run in a notebook).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

VARIABLE = "domain_model"


class ModelCodeUnfaithful(ValueError):
    """BESSER's script does not rebuild the same model (or holds what the safe loader skips)."""


def model_to_python(model: DomainModel) -> str:
    """The script that rebuilds ``model`` as ``domain_model`` (checked, see the module's doc)."""
    text = unchecked_code(model)
    check_rebuilds(text, model)
    return text


def unchecked_code(model: DomainModel) -> str:
    """BESSER's script for ``model``, elements in their creation order (which BESSER's generators
    follow, so a model rebuilt from it generates the same files); not yet checked."""
    from besser.utilities.buml_code_builder import domain_model_to_code

    with tempfile.TemporaryDirectory(prefix="besser-model-code-") as folder:
        path = Path(folder) / "model.py"
        try:
            domain_model_to_code(model, str(path), model_var_name=VARIABLE)
        except Exception as exc:  # noqa: BLE001 - BESSER's builder refuses some names by raising
            raise ModelCodeUnfaithful(f"BESSER could not write the model as code ({type(exc).__name__}: {exc})") from None
        return path.read_text(encoding="utf-8")


def check_rebuilds(text: str, model: DomainModel | str) -> None:
    """Raise ``ModelCodeUnfaithful`` unless ``text``, evaluated safely, defines ``model`` again
    (a model, or the digest of one)."""
    from besser.BUML.metamodel.structural import DomainModel

    from kernel_ext.errors import ToolFailure
    from kernel_ext.model.jsonform import model_digest
    from kernel_ext.model.safe_python import evaluate_source
    from kernel_ext.safetext import shown_text

    if shown_text(text) != text:  # a bidi override or separator could make a reader see other code than runs
        raise ModelCodeUnfaithful("the model code holds control or format characters (shown as escapes in the JSON form)")
    foreign = _foreign_imports(text)
    if foreign:  # the safe loader ignores an import it does not evaluate; Python would not
        raise ModelCodeUnfaithful(f"the model code imports {foreign[0]!r}, which is not BESSER")
    try:
        result = evaluate_source(text, source="model code")
    except ToolFailure as exc:
        raise ModelCodeUnfaithful(f"the model code does not load: {exc.message}") from None
    if result.skipped:
        raise ModelCodeUnfaithful(f"the model code holds statements the safe loader skips: {result.skipped[0]}")
    rebuilt = result.namespace.get(VARIABLE)
    if not isinstance(rebuilt, DomainModel):
        raise ModelCodeUnfaithful(f"the model code defines no DomainModel named {VARIABLE}")
    if model_digest(rebuilt) != (model if isinstance(model, str) else model_digest(model)):
        raise ModelCodeUnfaithful("the model code rebuilds a different model (its digest differs)")
    if isinstance(model, str) and unchecked_code(rebuilt) != text:
        # A stored script (read back from a run folder) is handed out only as BESSER's builder writes the
        # model it defines: what the safe loader never evaluates (an annotation, a docstring expression) a
        # notebook would run, so nothing but the builder's own text may reach a cell.
        raise ModelCodeUnfaithful("the model code is not what BESSER's builder writes for the model it defines")


def _foreign_imports(text: str) -> list[str]:
    """Modules the script imports besides BESSER's (and ``datetime``, which BESSER's header names)."""
    import ast

    from kernel_ext.pyparse import parse_source

    try:
        tree = parse_source(text, "model code")
    except (SyntaxError, ValueError) as exc:
        raise ModelCodeUnfaithful(f"the model code does not parse: {exc}") from None
    modules: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules.append("." * node.level + (node.module or ""))
    return [m for m in modules if m != "datetime" and m != "besser" and not m.startswith("besser.")]
