"""The runnable part of an exported run: the model as code, and the offline re-run.

The re-run needs nothing but the notebook and this package: the run's recorded provider turns
are written out as a cassette by a cell (a list of its lines, each a Python string literal),
the replay provider answers from it (``strict=False``, as every replay here: tool-result text
such as paths and timings differs between machines), every card is answered as it was decided
in the run, and the budgets, switches and explicit generator are the run's own. The last cell
compares the regenerated app with the manifest the run recorded (sha256 per file).

No stored text becomes code: each cell is the host's template with every value (request, file
names, call ids, turns) cut of secrets first, as a value, then written as a literal and checked
by ``codebuild`` (the cell parses to the template, each value one constant). Code text is never
redacted: a model script holding anything a redaction would cut is shown in JSON form instead.
"""

from __future__ import annotations

import json
from typing import Any

from kernel_ext.codebuild import build
from kernel_ext.hosting.export.record import RunRecord, decisions
from kernel_ext.hosting.export.sections import Cell
from kernel_ext.hosting.export.text import inline
from kernel_ext.secrets import redact, redact_text

# What a request may set that changes how a run unfolds (``RunRequest``; ``generate``'s arguments).
REPLAYED_OPTIONS = ("target", "max_turns", "max_cost_usd", "max_runtime_s", "auto_fix", "repair_rounds",
                    "enable_import_smoke_check")

FORM_CELL = """import json

from kernel_ext.model.jsonform import model_from_dict

domain_model = model_from_dict(json.loads($form))
"""
CHECK_CELL = """from kernel_ext.model.jsonform import model_digest

assert model_digest(domain_model) == $digest, 'this is not the model the run used'
print(f'{domain_model.name}: the model the run used (digest {model_digest(domain_model)[:12]})')"""
CUT_CHECK_CELL = """from kernel_ext.model.jsonform import model_digest

RUN_DIGEST = $digest
print(f'{domain_model.name}: the model the run used, with what looked like a key cut '
      f'(digest {model_digest(domain_model)[:12]}; the model the run used had {RUN_DIGEST[:12]})')"""
CASSETTE_CELL = """from pathlib import Path

# The run's provider turns as it recorded them (a cassette: the replay provider reads it; keys are never recorded)
TURNS = $turns
CASSETTE = Path($cassette)
CASSETTE.write_text('\\n'.join(TURNS) + '\\n', encoding='utf-8')
print(f'{CASSETTE}: {len(TURNS) - 1} recorded provider turns')"""
GENERATE_CELL = """import tempfile
from pathlib import Path

from kernel_ext.pipeline.generation import generate
from kernel_ext.providers.replay import ReplayProvider

REQUEST = $request
DECISIONS = $decisions  # call id -> approved, as decided in the run
OPTIONS = $options  # the generator, budgets and switches the run was started with
RERUN_DIR = Path(tempfile.mkdtemp(prefix=$prefix, dir='.'))

rerun = generate(domain_model, REQUEST, run_dir=RERUN_DIR, provider=@PROVIDER@, approve='none',
                 approver=lambda card: DECISIONS.get(card.call_id, False), allow_shell_tools=$shell, **OPTIONS)
done = await rerun.wait()
print(f'{RERUN_DIR}: ' + (f'{done.status} - {done.summary}' if done is not None else 'interrupted'))"""
PROVIDERS = {True: "ReplayProvider(CASSETTE, strict=False)", False: "'none'"}  # the host's two choices
COMPARE_CELL = """from kernel_ext.generation.manifest import tree_hashes

RECORDED = $recorded  # path -> sha256 of the app the run ended with
regenerated = tree_hashes(RERUN_DIR / 'app')
changed = sorted(p for p in set(RECORDED) | set(regenerated) if RECORDED.get(p) != regenerated.get(p))
print(f'{len(regenerated)} files regenerated: ' + ('the same files, byte for byte, as the run ended with'
      if not changed else f'{len(changed)} differ from the run: ' + ', '.join(changed[:20])))"""


def cut(value: Any, known: tuple[str, ...]) -> Any:
    """``value`` with known secrets, bearer credentials and key shapes cut from every string in it
    (keys too), by value only: what a cell then writes as a literal."""
    return redact(value, known, by_name=False)


def model_cells(record: RunRecord, known: tuple[str, ...] = ()) -> list[Cell]:
    """The model as B-UML Python: the script the run kept (its elements in creation order, which
    the generators follow), else one written from the recipe's JSON form, else that form itself;
    a script is shown only once the safe loader has rebuilt the recorded model from it, and only
    when no redaction would touch it (its text is never edited: the JSON form, cut, is shown)."""
    digest = str(record.recipe["model"].get("digest", ""))
    code, note = _model_code(record, digest)
    if code is not None and redact_text(code, known) != code:
        code, note = None, ("The B-UML model the run used, in this project's JSON form: its code holds text "
                            "shaped like a key, which is cut here, so this model is not byte for byte the run's.")
    check = CHECK_CELL
    if code is None:
        form = record.recipe["model"]["form"]
        shown = cut(form, known)
        check = CHECK_CELL if shown == form else CUT_CHECK_CELL
        code = build(FORM_CELL, {"form": json.dumps(shown, ensure_ascii=False)})
    return [("markdown", "## The model\n\n" + note), ("code", code), ("code", build(check, {"digest": digest}))]


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


def rerun_cells(record: RunRecord, known: tuple[str, ...] = ()) -> list[Cell]:
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
        turns = [_turn(line, known) for line in record.turns.split("\n") if line.strip()]  # the recorder's lines
        cells.append(("code", build(CASSETTE_CELL, {"turns": turns, "cassette": f"{record.run_id}.turns.cassette.jsonl"})))
    cells.append(("code", _generate_source(record, kind, known)))
    recorded = record.recipe.get("files") or {}
    cells.append(("code", build(COMPARE_CELL, {"recorded": cut(dict(sorted(recorded.items())), known)})))
    return cells


def _turn(line: str, known: tuple[str, ...]) -> str:
    """One cassette line cut as the JSON value it holds (never as text: a cut could join two fields),
    written back ASCII-only, as the recorder writes it (no raw line separator inside a line)."""
    try:
        value = json.loads(line)
    except ValueError:
        return str(cut(line, known))
    return json.dumps(cut(value, known))


def _generate_source(record: RunRecord, kind: str, known: tuple[str, ...]) -> str:
    started = record.started
    options: dict[str, Any] = {k: record.request[k] for k in REPLAYED_OPTIONS if record.request.get(k) is not None}
    request_text = record.request.get("request") or record.recipe.get("request", "")
    shell = bool(started.shell_tools_enabled) if started is not None else False
    template = GENERATE_CELL.replace("@PROVIDER@", PROVIDERS[kind != "none"])  # one of the host's own two
    return build(template, {"request": cut(str(request_text), known), "decisions": cut(decisions(record), known),
                            "options": cut(options, known), "prefix": f"rerun-{record.run_id}-", "shell": shell})
