"""The runnable part of an exported run: the model as code, and the offline re-run.

The re-run needs nothing but the notebook and this package: the run's recorded provider turns
are written out as a cassette by a cell (a list of its lines, each a Python string literal),
the replay provider answers from it (``strict=False``, as every replay here: tool-result text
such as paths and timings differs between machines), every card is answered as it was decided
in the run, and the budgets, switches and explicit generator are the run's own. The last cell
compares the regenerated app with the manifest the run recorded (sha256 per file). Every value
is written with ``repr`` or as JSON read by ``json.loads``, so no stored text becomes code.
"""

from __future__ import annotations

import json
from typing import Any

from kernel_ext.hosting.export.record import RunRecord, decisions
from kernel_ext.hosting.export.sections import Cell
from kernel_ext.hosting.export.text import inline

# What a request may set that changes how a run unfolds (``RunRequest``; ``generate``'s arguments).
REPLAYED_OPTIONS = ("target", "max_turns", "max_cost_usd", "max_runtime_s", "auto_fix", "repair_rounds",
                    "enable_import_smoke_check")


def model_cells(record: RunRecord) -> list[Cell]:
    """The model as B-UML Python: the script the run kept (its elements in creation order, which
    the generators follow), else one written from the recipe's JSON form, else that form itself;
    a script is shown only once the safe loader has rebuilt the recorded model from it."""
    digest = record.recipe["model"].get("digest", "")
    code, note = _model_code(record, digest)
    if code is None:
        form = record.recipe["model"]["form"]
        code = ("import json\n\nfrom kernel_ext.model.jsonform import model_from_dict\n\n"
                f"domain_model = model_from_dict(json.loads({json.dumps(form, ensure_ascii=False)!r}))\n")
    check = ("from kernel_ext.model.jsonform import model_digest\n\n"
             f"assert model_digest(domain_model) == {digest!r}, 'this is not the model the run used'\n"
             "print(f'{domain_model.name}: the model the run used (digest {model_digest(domain_model)[:12]})')")
    return [("markdown", "## The model\n\n" + note), ("code", code), ("code", check)]


def _model_code(record: RunRecord, digest: str) -> tuple[str | None, str]:
    from kernel_ext.errors import ToolFailure
    from kernel_ext.model.jsonform import model_from_dict
    from kernel_ext.model.pycode import ModelCodeUnfaithful, check_rebuilds, model_to_python

    said = "The B-UML model the run used, as Python that rebuilds it (run it, change it, generate again)."
    if record.model_code:
        try:
            check_rebuilds(record.model_code, digest)
            return record.model_code, said
        except ModelCodeUnfaithful:
            pass  # not the recorded model (or not only model-building): written again below
    try:
        code = model_to_python(model_from_dict(record.recipe["model"]["form"]))
    except (ModelCodeUnfaithful, ToolFailure) as exc:
        reason = exc.message if isinstance(exc, ToolFailure) else str(exc)
        return None, f"The B-UML model the run used, in this project's JSON form ({reason})."
    return code, (said + " The run kept no script of its own, so this one lists the elements sorted by name; "
                  "generators follow the order elements were created in, so a re-run may order some lines differently.")


def rerun_cells(record: RunRecord) -> list[Cell]:
    started = record.started
    kind = started.provider_kind if started is not None else "none"
    base = record.request.get("base_run_id") or record.recipe.get("base_run_id")
    head = "## Re-run it offline\n\n"
    if base:
        return [("markdown", head + f"This run continued run {inline(str(base))}'s app, which this notebook does not "
                 "carry, so it cannot be re-run from here alone.")]
    if kind != "none" and not record.turns:
        return [("markdown", head + "This run's provider turns were not recorded (a run from before runs kept "
                 "them, or a provider that recorded to a cassette of its own), so it cannot be replayed from here.")]
    intro = (head + "The cells below generate the app again from the model above, into a fresh folder, with no "
             "live model: " + ("the replay provider answers from the provider turns the run recorded (written "
                               "out below as a cassette), " if kind != "none" else "the run had no provider, ")
             + "every card is answered as it was decided in the run, and the budgets are the run's own. "
             "The last cell compares the regenerated app with the files the run ended with.")
    cells: list[Cell] = [("markdown", intro)]
    if kind != "none":
        assert record.turns is not None
        lines = ",\n".join(f"    {line!r}" for line in record.turns.splitlines() if line.strip())
        name = f"{record.run_id}.turns.cassette.jsonl"
        cells.append(("code", "from pathlib import Path\n\n# The run's provider turns as it recorded them "
                      "(a cassette: the replay provider reads it; keys are never recorded)\n"
                      f"TURNS = [\n{lines},\n]\nCASSETTE = Path({name!r})\n"
                      "CASSETTE.write_text('\\n'.join(TURNS) + '\\n', encoding='utf-8')\n"
                      "print(f'{CASSETTE}: {len(TURNS) - 1} recorded provider turns')"))
    cells.append(("code", _generate_source(record, kind)))
    cells.append(("code", _compare_source(record)))
    return cells


def _generate_source(record: RunRecord, kind: str) -> str:
    started = record.started
    options: dict[str, Any] = {k: record.request[k] for k in REPLAYED_OPTIONS if record.request.get(k) is not None}
    request_text = record.request.get("request") or record.recipe.get("request", "")
    provider = "ReplayProvider(CASSETTE, strict=False)" if kind != "none" else "'none'"
    shell = bool(started.shell_tools_enabled) if started is not None else False
    return "\n".join([
        "import tempfile",
        "from pathlib import Path",
        "",
        "from kernel_ext.pipeline.generation import generate",
        "from kernel_ext.providers.replay import ReplayProvider",
        "",
        f"REQUEST = {request_text!r}",
        f"DECISIONS = {decisions(record)!r}  # call id -> approved, as decided in the run",
        f"OPTIONS = {options!r}  # the generator, budgets and switches the run was started with",
        f"RERUN_DIR = Path(tempfile.mkdtemp(prefix={('rerun-' + record.run_id + '-')!r}, dir='.'))",
        "",
        f"rerun = generate(domain_model, REQUEST, run_dir=RERUN_DIR, provider={provider}, approve='none',",
        f"                 approver=lambda card: DECISIONS.get(card.call_id, False), allow_shell_tools={shell}, **OPTIONS)",
        "done = await rerun.wait()",
        "print(f'{RERUN_DIR}: ' + (f'{done.status} - {done.summary}' if done is not None else 'interrupted'))",
    ])


def _compare_source(record: RunRecord) -> str:
    recorded = record.recipe.get("files") or {}
    return "\n".join([
        "from kernel_ext.generation.manifest import tree_hashes",
        "",
        f"RECORDED = {dict(sorted(recorded.items()))!r}  # path -> sha256 of the app the run ended with",
        "regenerated = tree_hashes(RERUN_DIR / 'app')",
        "changed = sorted(p for p in set(RECORDED) | set(regenerated) if RECORDED.get(p) != regenerated.get(p))",
        "print(f'{len(regenerated)} files regenerated: ' + ('the same files, byte for byte, as the run ended with'",
        "      if not changed else f'{len(changed)} differ from the run: ' + ', '.join(changed[:20])))",
    ])
