"""Running the real pipeline in tests: authored scripts (labelled scripted), real files."""

from __future__ import annotations

import asyncio

from kernel_ext.pipeline.generation import generate
from kernel_ext.providers.scripted import Script, ScriptedProvider, Turn, call

__all__ = ["Script", "Turn", "call", "events_of", "recording", "run_pipeline"]


def run_pipeline(tmp_path, request, turns=None, *, provider=None, approve="all", timeout=240, model="example:library", **options):
    """Run the whole pipeline on ``model`` (the Library example by default); returns (run, done event)."""

    async def go():
        chosen = provider
        if chosen is None and turns is not None:
            chosen = ScriptedProvider(Script.of("test", turns))
        run = generate(model, request, run_dir=tmp_path / "run", provider=chosen if chosen is not None else "none",
                       approve=approve, **options)
        done = await asyncio.wait_for(run.wait(), timeout)
        return run, done

    return asyncio.run(go())


def events_of(run, type_):
    return [e for e in run.events.events if e.type == type_]


def recording(turns, seen):
    """Scripted turns that also keep each request the model received in ``seen`` (to read it back)."""

    def reply(turn):
        def source(request):
            seen.append(request)
            return turn

        return source

    return [reply(t) for t in turns]
