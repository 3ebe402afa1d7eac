"""``demo``: the headless main job. Until the pipeline lands it runs every side-effects scenario."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="the headless demo")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from kernel_ext.scenarios import side_effects

    outcomes = []
    for name in side_effects.SCENARIOS:
        outcomes.append(side_effects.run(name))
        print()
    passed = sum(o.passed for o in outcomes)
    print(f"{passed} of {len(outcomes)} side-effects scenarios behaved as the chapter says")
    return 0 if passed == len(outcomes) else 1
