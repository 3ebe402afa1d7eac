"""The suite run with a person's provider: N repeats per task, each run recorded, one results file.

``--provider`` names who answers: a live model (``openai``, ``anthropic``: keys and base URLs from
the usual variables), a folder or file of cassettes (``replay:PATH``: one cassette per task and
repeat, ``<task>.r<N>.jsonl``, so the task is known from the name), or one of each task's own
scripts (``scripted:oracle|null|wrong``: authored turns, not a model). Every card is answered by
one labelled policy, ``approve=all`` (no person: each call still runs inside the sandbox, under
the operator's policy), and the results say so. ``record`` keeps each run as a cassette named the
same way, so a live success replays offline, through the same verifier, as a regression test.

A replay here feeds the recorded answers back in order and notes (``replay_note``) where this
run's requests first differ from the recording (a prompt or a tool description changed) instead
of stopping there: the question a regression test asks is whether those answers still make a
verified app. A run that asks for more answers than were recorded still ends on
``replay_diverged``, and its verifier fails.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.eval.results import SuiteResults
from kernel_ext.eval.scripts import KINDS
from kernel_ext.providers.recording import request_record
from kernel_ext.providers.replay import ReplayProvider, first_difference

if TYPE_CHECKING:
    from kernel_ext.eval.runner import TaskOutcome
    from kernel_ext.eval.tasks.base import Task
    from kernel_ext.providers.base import Provider
    from kernel_ext.providers.bounds import CallBudget
    from kernel_ext.providers.events import Event
    from kernel_ext.providers.messages import Request
    from kernel_ext.validation.apphost.host import AppHost

SHIPPED = Path(__file__).resolve().parent / "data" / "cassettes"  # each task's oracle script, recorded (not a model)
CASSETTE = re.compile(r"^(?P<task>[a-z0-9][a-z0-9-]*)\.r(?P<repeat>[1-9][0-9]{0,3})\.jsonl$")
MAX_REPEAT = 100
POLICY = "approve=all: every card answered by the host's policy, no person (each call still inside the sandbox)"
LIVE_HINT = {
    "openai": "export OPENAI_API_KEY=... (or OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama, no key needed)",
    "anthropic": "export ANTHROPIC_API_KEY=... (or ANTHROPIC_BASE_URL for a compatible server)",
}


def cassette_name(task_id: str, repeat: int) -> str:
    return f"{task_id}.r{repeat}.jsonl"


@dataclass(frozen=True)
class PlannedRun:
    task: Task
    repeat: int
    cassette: Path | None = None  # what a replay answers from


class NotedReplay(ReplayProvider):
    """A cassette's answers in order; the first request that differs from the recording is noted."""

    def __init__(self, cassette: Path):
        super().__init__(cassette, strict=False)
        self.note = ""

    async def _events(self, request: Request, cancel: asyncio.Event | None,
                      budget: CallBudget | None = None) -> AsyncGenerator[Event, None]:
        exchanges = self.cassette.exchanges
        if self.position < len(exchanges):
            recorded = exchanges[self.position]["request"]
            if not self.note and (where := _difference(recorded, request_record(request))):
                self.note = f"request #{self.position + 1} differs from the recording at {where}; answers replayed regardless"
            self.cassette.exchanges[self.position] = {**exchanges[self.position], "request": request_record(request)}
        async for event in super()._events(request, cancel, budget):
            yield event


def _difference(recorded: dict[str, Any], sent: dict[str, Any]) -> str:
    found = first_difference(_without_tool_output(recorded), _without_tool_output(sent))
    return found[0] if found is not None else ""


def _without_tool_output(record: dict[str, Any]) -> dict[str, Any]:
    """Tool results hold paths, ids and timings of one machine: not a difference worth noting."""
    messages = [{k: v for k, v in m.items() if not (m.get("role") == "tool" and k == "content")} for m in record["messages"]]
    return {**record, "messages": messages}


@dataclass
class ProviderChoice:
    """``--provider`` read: who answers each run, and how that is labelled in the results."""

    spec: str
    model: str | None = None
    kind: str = field(init=False)
    source: str = field(init=False)

    def __post_init__(self) -> None:
        head, _, rest = self.spec.partition(":")
        head = head.strip().lower()
        if head in LIVE_HINT and not rest:
            self.kind, self.source = "live", head
        elif head == "replay" and rest:
            self.kind, self.source = "replay", rest
        elif head == "scripted" and rest in KINDS:
            self.kind, self.source = "scripted", rest
        else:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT,
                              f"--provider {self.spec!r} is not one of openai, anthropic, replay:DIR_OR_FILE, "
                              f"scripted:{'|'.join(KINDS)}")

    def check(self) -> None:
        """A live provider is built once before any run, so a missing key is said before work starts."""
        if self.kind == "live":
            self._live()

    def _live(self) -> Provider:
        from kernel_ext.providers.config import ProviderConfig
        from kernel_ext.providers.events import ProviderError
        from kernel_ext.providers.factory import build_provider

        try:
            return build_provider(ProviderConfig.from_env(provider=self.source, model=self.model))
        except ProviderError as exc:
            hint = f"; {LIVE_HINT[self.source]}" if exc.code == ErrorCode.NOT_CONFIGURED else ""
            raise ToolFailure(exc.code, exc.message + hint) from None

    def plan(self, tasks: Sequence[str] | None, repeat: int) -> list[PlannedRun]:
        """The runs, in order: each task ``repeat`` times, or each cassette of a replay once."""
        from kernel_ext.eval.tasks import TASKS

        unknown = [t for t in tasks or () if t not in TASKS]
        if unknown:
            raise ToolFailure(ErrorCode.NOT_FOUND, f"no evaluation task {', '.join(map(repr, unknown))}; "
                                                   f"known: {', '.join(TASKS)}")
        if not 1 <= repeat <= MAX_REPEAT:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"--repeat {repeat} is not within 1..{MAX_REPEAT}")
        if self.kind != "replay":
            chosen = [t for t in TASKS if not tasks or t in tasks]  # the registry's order, as a replay's
            return [PlannedRun(TASKS[t], n) for t in chosen for n in range(1, repeat + 1)]
        found = self._cassettes()
        unnamed = [p.name for p, m in found if m is None or m["task"] not in TASKS]
        if unnamed:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"cassette {unnamed[0]!r} names no evaluation task "
                                                          "(expected <task>.r<N>.jsonl)")
        runs = [PlannedRun(TASKS[m["task"]], int(m["repeat"]), p) for p, m in found if m is not None]
        runs = [r for r in runs if not tasks or r.task.id in tasks]
        order = {t: i for i, t in enumerate(TASKS)}
        runs.sort(key=lambda r: (order[r.task.id], r.repeat))
        if not runs:
            raise ToolFailure(ErrorCode.NOT_FOUND, f"no cassette for {', '.join(tasks or ['any task'])} in {self.source}")
        return runs

    def _cassettes(self) -> list[tuple[Path, dict[str, str] | None]]:
        path = Path(self.source).expanduser()
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix == ".jsonl" and p.is_file())
        elif path.is_file():
            files = [path]
        else:
            raise ToolFailure(ErrorCode.NOT_FOUND, f"replay: {self.source} is neither a folder of cassettes nor a cassette")
        return [(p, (m.groupdict() if (m := CASSETTE.match(p.name)) else None)) for p in files]

    def build(self, run: PlannedRun) -> Provider:
        if self.kind == "live":
            return self._live()
        if self.kind == "replay":
            assert run.cassette is not None
            from kernel_ext.providers.events import ProviderError

            try:
                return NotedReplay(run.cassette)
            except ProviderError as exc:
                raise ToolFailure(exc.code, exc.message) from None
        from kernel_ext.eval.scripts import provider

        return provider(run.task.script(self.source))  # type: ignore[arg-type]

    def describe(self, providers: Sequence[Provider]) -> dict[str, Any]:
        """The results' header: the spec, what kind answered, and for a replay what it was recorded from."""
        first = providers[0].describe() if providers else {}
        out: dict[str, Any] = {"spec": self.spec, "kind": self.kind, "label": self.spec if self.kind != "scripted" else
                               f"scripted:<task>-{self.source}", "model": first.get("model", "")}
        if self.kind == "scripted":
            out["notice"] = f"each task's {self.source} script: authored turns, not a model"
        elif self.kind == "replay":
            sources = sorted({_recorded_from(p) for p in providers})
            out["notice"] = "replayed from recordings, not a live model; recorded from: " + "; ".join(sources)
        return out


def _recorded_from(provider: Provider) -> str:
    recorded = provider.cassette.recorded_from if isinstance(provider, ReplayProvider) else {}
    kind = str(recorded.get("kind", "?"))
    what = {"scripted": "authored scripts, not a model", "live": "a live model"}.get(kind, kind)
    model = f" {recorded['model']}" if kind == "live" and recorded.get("model") else ""
    return f"{what}{model}"


Progress = Callable[[int, int, PlannedRun, "TaskOutcome"], None]
Keep = Callable[[SuiteResults], None]
# A live run that ended on one of these before the model answered a turn says the endpoint cannot
# answer at all (down, the key refused, no money left): every later run would end the same way.
PROVIDER_CANNOT_ANSWER = frozenset({ErrorCode.UPSTREAM_LLM, ErrorCode.INVALID_KEY, ErrorCode.BUDGET_EXHAUSTED,
                                    ErrorCode.NOT_CONFIGURED})


def cannot_answer(choice: ProviderChoice, outcome: TaskOutcome) -> str:
    """Why the suite should stop after this run ("" to go on): a live endpoint that never answered."""
    code = outcome.metrics.error.partition(":")[0].strip().lower()
    if choice.kind != "live" or outcome.metrics.turns or code not in PROVIDER_CANNOT_ANSWER:
        return ""
    return f"the provider did not answer ({outcome.metrics.error}); the other runs would end the same way"


async def run_suite(choice: ProviderChoice, runs: Sequence[PlannedRun], runs_dir: Path, host: AppHost, *,
                    record: Path | None = None, shell: bool = False, progress: Progress | None = None,
                    keep: Keep | None = None) -> SuiteResults:
    """Each planned run through ``runner.run_task_async`` into ``runs_dir/<task>.r<N>``; the results.

    ``keep`` is given the results after every run (the command line writes its JSON then), so a suite
    interrupted half-way loses none of the runs that finished. A live endpoint that never answers
    stops the suite after its first run (``results.stopped`` says why)."""
    from kernel_ext.eval.runner import run_task_async

    providers: list[Provider] = []
    approvals = {"policy": POLICY, "shell": "on" if shell else "off"}
    results = SuiteResults(choice.describe(providers), approvals, [], planned=len(runs))
    for index, planned in enumerate(runs, 1):
        provider = choice.build(planned)
        providers.append(provider)
        cassette = record / cassette_name(planned.task.id, planned.repeat) if record is not None else None
        if cassette is not None:  # a recording that cannot be written stops and is removed; the run goes on
            provider.record(cassette, best_effort=True)
        run_dir = runs_dir / f"{planned.task.id}.r{planned.repeat}"
        outcome = await run_task_async(planned.task, provider, run_dir, host, shell=shell)
        await provider.aclose()
        if provider.recorder is not None and provider.recorder.failed:
            cassette = None
        results.runs.append({**outcome.as_dict(), "repeat": planned.repeat,
                             "cassette": str(cassette or planned.cassette or "") or None,
                             "replay_note": getattr(provider, "note", "") or None})
        results.provider = choice.describe(providers)
        results.stopped = cannot_answer(choice, outcome)
        if keep is not None:
            keep(results)
        if progress is not None:
            progress(index, len(runs), planned, outcome)
        if results.stopped:
            break
    return results
