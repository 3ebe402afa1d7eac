"""``scenario side-effects [--scenario NAME]``: the chapter-5 experiments, exit 0 when they behaved."""

from __future__ import annotations

import argparse

SCENARIO_SETS = ("side-effects",)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("scenario", help="run authored boundary experiments on disposable files")
    parser.add_argument("set", choices=SCENARIO_SETS)
    parser.add_argument(
        "--scenario",
        default="default",
        choices=("default", "policy-denied", "approval-denied", "stale-input", "all"),
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from kernel_ext.scenarios import side_effects

    names = side_effects.SCENARIOS if args.scenario == "all" else (args.scenario,)
    outcomes = [side_effects.run(name) for name in names]
    return 0 if all(o.passed for o in outcomes) else 1
