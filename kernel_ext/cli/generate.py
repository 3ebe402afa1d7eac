"""``generate MODEL_FILE ["REQUEST"] [--out DIR] [--provider ...] [--allow ...] [--approve ...]``.

With a REQUEST, the whole three-phase run (the pipeline): the timeline is printed as it
happens, and ``--out DIR`` is the run folder (``app/``, ``events.jsonl``, ``run.json``).
Without one, Phase 1 only: one BESSER generator into DIR; the model's method bodies (other than
the shipped examples') are generated only with ``--approve edits|shell|all`` (there is no card
to show them on), else the methods are stubs and a finding says so. Exit 0 when no blocker remains,
1 when one does, 2 for a refusal or usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernel_ext.hosting.flags import add_switch_flags


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("generate", help=(
        "build a working app from a model: with a REQUEST in words, the whole run (BESSER's generator writes the code, "
        "an LLM edits it to fit, the app is tested, changes and commands wait for your yes); without one, the "
        "generator's code alone"))
    parser.add_argument("model", nargs="?", help="a model file (.py, .plantuml, .json) or example:NAME")
    parser.add_argument("request", nargs="?", help="what to build, in words: runs the whole pipeline")
    parser.add_argument("--out", type=Path, help="the folder to generate into (with a REQUEST: the run folder)")
    parser.add_argument("--generator", default=None, help="the target, e.g. fastapi_backend, sqlalchemy, nextjs")
    parser.add_argument("--provider", default=None, help="none | replay:CASSETTE | scripted:FILE | openai | anthropic")
    parser.add_argument("--allow", default="", help="operator: extra categories, e.g. shell (edit, generate, test are on)")
    parser.add_argument("--approve", default="none", choices=("none", "edits", "shell", "all"),
                        help="categories approved without asking; on a terminal the others are asked (y/n/q), without one they are denied")
    parser.add_argument("--max-turns", type=int, default=40)
    parser.add_argument("--max-runtime", type=float, default=None, metavar="SECONDS",
                        help="the run's wall-time budget, enforced while a reply streams (default 1800)")
    parser.add_argument("--max-cost", type=float, default=None, metavar="USD", help="the run's cost budget (default 2.0)")
    add_switch_flags(parser)
    parser.add_argument("--options", default="{}", help="the generator's options as a JSON object")
    parser.add_argument("--no-check", action="store_true", help="skip the syntax, import and app-import checks")
    parser.add_argument("--json", action="store_true", help="print the Phase 1 result as JSON")
    parser.add_argument("--list", action="store_true", help="list the generators and exit")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from kernel_ext.errors import ToolFailure
    from kernel_ext.generation.phase1 import run_phase1
    from kernel_ext.generation.registry import ALL_TARGETS

    if args.list:
        for spec in ALL_TARGETS:
            print(f"{spec.name:16} {spec.kind:8} needs {'+'.join(sorted(spec.needs)):12} -> {spec.subdir or '.'}/  {spec.label}")
        return 0
    if args.model and args.request:
        from kernel_ext.cli.run_text import run_pipeline

        return run_pipeline(args)
    if not args.model or args.out is None:
        print("error: MODEL and --out DIR are required (or --list)", file=sys.stderr)
        return 2
    try:
        options = json.loads(args.options)
    except json.JSONDecodeError as exc:
        print(f"error: --options is not JSON: {exc.msg}", file=sys.stderr)
        return 2
    try:
        settled = _settled_model(args)
        result = run_phase1(settled.model, args.out, args.generator or "fastapi_backend", options, check=not args.no_check)
    except ToolFailure as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    if args.json:
        data = result.to_dict()
        data["findings"] = [f.as_event() for f in settled.findings] + data["findings"]
        print(json.dumps(data, indent=2))
    else:
        _print_summary(result, args.out, settled.findings)
    return 0 if result.ok else 1


def _settled_model(args: argparse.Namespace):
    """The checked model, its names checked, its method bodies kept only on ``--approve edits|shell|all``."""
    from kernel_ext.hosting.options import OperatorSettings
    from kernel_ext.model.loading import load
    from kernel_ext.model.names import check_names
    from kernel_ext.pipeline.method_bodies import decide_without_card

    loaded = load(args.model)
    check_names(loaded.model, origin=loaded.origin)
    settled = decide_without_card(loaded.model, OperatorSettings.from_environment().model_method_bodies, args.approve != "none")
    if settled.model is not loaded.model:
        from kernel_ext.model.loading import LoadedModel

        settled.model = LoadedModel(settled.model, loaded.kind, loaded.origin, loaded.notes, loaded.warnings)
    else:
        settled.model = loaded
    return settled


def _print_summary(result, out: Path, findings=()) -> None:
    where = out / result.subdir if result.subdir else out
    print(f"phase 1: {result.generator} ({result.kind}) for model {result.model_name!r} -> {where}")
    print(f"  {len(result.published.created)} created, {len(result.published.overwritten)} overwritten, "
          f"{len(result.published.unchanged)} unchanged; generator {result.generator_seconds:.2f} s, "
          f"checks {result.checks.seconds:.2f} s, app import: {result.checks.app_import}")
    for note in result.notes:
        print(f"  note: {note}")
    for finding in [*findings, *result.findings]:
        print(f"  [{finding.severity}] {finding.message}")
