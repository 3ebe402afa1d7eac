"""``demo``: the headless main job.

By default it replays the shipped cassette of the seed's example (the Library model, "a
FastAPI backend with JWT authentication and a Dockerfile") through the whole pipeline,
offline, printing the timeline and a final summary with the authorship split. The cassette
was recorded from an authored script and is labelled as a replay. ``--record`` re-records it
from the script; ``--side-effects`` runs the chapter-5 boundary experiments instead.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernel_ext.providers.base import Provider


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="the headless demo (the Library JWT run from the shipped cassette)")
    parser.add_argument("--out", type=Path, default=None, help="the run folder (default: besser_runs/demo-<time>)")
    parser.add_argument("--record", action="store_true", help="re-record the shipped cassette from the authored script")
    parser.add_argument("--side-effects", action="store_true", help="run the chapter-5 side-effects experiments instead")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    if args.side_effects:
        return _side_effects()
    out = args.out or Path("besser_runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    return asyncio.run(_library_jwt(out, args.record))


async def _library_jwt(out: Path, record: bool) -> int:
    from kernel_ext.cli.run_text import print_timeline
    from kernel_ext.pipeline.generation import generate
    from kernel_ext.providers.replay import ReplayProvider
    from kernel_ext.providers.scripted import ScriptedProvider

    provider: Provider
    from kernel_ext.scenarios import library_jwt

    if record:
        provider = ScriptedProvider(library_jwt.script())
        library_jwt.CASSETTE.unlink(missing_ok=True)
        provider.record(library_jwt.CASSETTE)
    else:
        provider = ReplayProvider(library_jwt.CASSETTE, strict=False)
    print(f"provider: {provider.label} ({provider.kind}; no live model is called)")
    run = generate("example:library", library_jwt.REQUEST, run_dir=out, provider=provider, approve="all")
    done = await print_timeline(run)
    print(f"run folder: {out} (the app is in {out / 'app'})")
    if record:
        print(f"cassette written: {library_jwt.CASSETTE}")
    return 0 if done is not None and done.status == "completed" else 1


def _side_effects() -> int:
    from kernel_ext.scenarios import side_effects

    outcomes = []
    for name in side_effects.SCENARIOS:
        outcomes.append(side_effects.run(name))
        print()
    passed = sum(o.passed for o in outcomes)
    print(f"{passed} of {len(outcomes)} side-effects scenarios behaved as the chapter says")
    return 0 if passed == len(outcomes) else 1
