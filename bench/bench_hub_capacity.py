"""How many students one node holds: N students on a real local JupyterHub, one demo run each, at once.

The hub is docs/jupyterhub_config.py (configurable-http-proxy, SimpleLocalProcessSpawner), started
with a class of students ``s01``..``sNN``; every student has a single-user server of their own with
the extension. For N in 1, 2, 4, 8, 16 (the rounds follow each other on the same hub), the first N
students each start one demo run (the Library model, the shipped ``library-jwt`` cassette through
the replay provider) at the same moment, through the hub's proxy with their own token, and follow
it over SSE. The runs start with ``approve: none`` and the follower answers each approval card by
REST as it arrives (a script in the student's place; ``--approve all`` skips the cards instead).

A newly started server first does one untimed run (its lazy imports and caches are warm, as for a
student past their first run), so every round measures the same thing; each N is run ``--repeat``
times (3) and its runs pooled. Per N: runs completed, p50 / p95 run time (POST to ``done``), p95
event latency to the follower (arrival minus the event's ``ts``, same clock), peak RSS per server
(its process tree: the server, app hosts, sandboxes, each at its own ``VmHWM``, summed, sampled
every 0.25 s; the server's own peak is reset before each round through ``clear_refs``), peak RSS
per run (that peak minus the server process's idle RSS before the round: each server holds one
run, and an app host still up from the last run counts as the run's), each beside the N = 1
round of the same bench. The machine's load average is printed beside: on a shared machine run
times move with it.

The rounds stop when a run fails, when p50 run time passes 3x N = 1, or when the next round
would not fit the time budget. The load itself is ``tests/run_load.py``.

Run: ``.venv/bin/python bench/bench_hub_capacity.py [--n 1,2,4,8,16] [--budget S] [--approve script|all]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from common import Figure, Target, emit, emit_table, figure  # noqa: E402

ROUNDS = (1, 2, 4, 8, 16)
SLOWDOWN_STOP = 3.0  # p50 run time past this many times N = 1: the node is full


@dataclass
class Round:
    n: int
    runs: list  # run_load.Followed
    wall_s: float
    tree_peak_kib: list[int]  # per server: peak summed RSS of its process tree
    run_kib: list[int]  # per server (one run each): tree peak minus its idle RSS before the round
    server_hwm_kib: list[int]  # per server: the server process's own VmHWM over the round
    latencies_s: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)  # the machine's 1-minute load average after each round

    @property
    def completed(self) -> int:
        return sum(run.status == "completed" for run in self.runs)

    def run_s(self, q: float) -> float:
        from run_load import quantile

        return quantile([run.seconds for run in self.runs], q)

    def latency_ms(self, q: float) -> float:
        from run_load import quantile

        return quantile(self.latencies_s, q) * 1000


# -- memory: one /proc pass per sample, every server's tree summed -------------------------------------


def _parents() -> dict[int, int]:
    """pid -> parent pid for every live process, from ``/proc/<pid>/stat``."""
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    table[int(entry.name)] = int(stat.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return table


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree_kib(roots: list[int], key: str) -> list[int]:
    """Each root's live process tree (the root included), its ``key`` (``VmHWM:``, ``VmRSS:``) summed:
    with ``VmHWM:`` every process counts at its own peak, so a sample misses no short spike."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    sums = []
    for root in roots:
        total, todo, seen = 0, [root], set()
        while todo:
            pid = todo.pop()
            if pid in seen or pid not in parents:
                continue
            seen.add(pid)
            total += _status_kib(pid, key)
            todo.extend(children.get(pid, ()))
        sums.append(total)
    return sums


def vm_hwm_kib(pid: int) -> int:
    return _status_kib(pid, "VmHWM:")


def reset_hwm(pid: int) -> None:
    """Start the process's peak RSS afresh (``clear_refs`` 5: VmHWM := current RSS)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


class TreeSampler:
    """Peak of each server's tree (its processes' VmHWM summed), sampled on a thread while a round runs."""

    def __init__(self, roots: list[int], interval: float = 0.25):
        self.roots, self.interval = roots, interval
        self.peaks = tree_kib(roots, "VmHWM:")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.peaks = [max(a, b) for a, b in zip(self.peaks, tree_kib(self.roots, "VmHWM:"), strict=True)]

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# -- the load ------------------------------------------------------------------------------------------


def body(approve: str) -> dict:
    from run_load import DEMO

    return {**DEMO, "approve": "all" if approve == "all" else "none"}


async def one_run(url: str, token: str, request: dict, began: float, timeout: float):
    from run_load import client_for, follow, start

    async with client_for(url, token) as client:
        run = await start(client, request)
        return await follow(client, run, began, timeout, answer_cards=request["approve"] == "none")


async def at_once(students: list[tuple[str, str]], request: dict, timeout: float) -> tuple[list, float]:
    """One demo run per (REST root, token), all started at the same moment; (followed runs, wall s)."""
    began = time.monotonic()
    runs = await asyncio.gather(*(one_run(url, token, request, began, timeout) for url, token in students))
    return list(runs), time.monotonic() - began


class Classroom:
    """The hub and the students' servers started so far: name -> (REST root, token, server pid)."""

    def __init__(self, hub):
        self.hub = hub
        self.servers: dict[str, tuple[str, str, int]] = {}

    async def ensure(self, names: list[str], request: dict, timeout: float) -> None:
        new = [name for name in names if name not in self.servers]
        if not new:
            return
        pids = await asyncio.gather(*(self.hub.start_server(name, timeout=300) for name in new))
        tokens = await asyncio.gather(*(self.hub.token_for(name) for name in new))
        for name, pid, token in zip(new, pids, tokens, strict=True):
            self.servers[name] = (f"{self.hub.url}/user/{name}/besser-agent/", token, pid)
        warm, _ = await at_once([self.servers[name][:2] for name in new], request, timeout)  # untimed: warm-up
        failed = [run.id for run in warm if run.status != "completed"]
        if failed:
            print(f"warning: warm-up runs {failed} ended {[run.status for run in warm if run.id in failed]}", flush=True)


async def round_of(room: Classroom, names: list[str], request: dict, timeout: float) -> Round:
    await room.ensure(names, request, timeout)
    students = [room.servers[name] for name in names]
    pids = [pid for _, _, pid in students]
    for pid in pids:
        reset_hwm(pid)
    idle = [_status_kib(pid, "VmRSS:") for pid in pids]  # the server alone: a lingering app host counts as the run's
    with TreeSampler(pids) as sampler:
        runs, wall = await at_once([(url, token) for url, token, _ in students], request, timeout)
    peaks = sampler.peaks
    return Round(len(names), runs, wall, peaks, [max(0, p - i) for p, i in zip(peaks, idle, strict=True)],
                 [vm_hwm_kib(pid) for pid in pids], [s for run in runs for s in run.latencies],
                 [os.getloadavg()[0]])


def pooled(rounds: list[Round]) -> Round:
    """Repeats of one N as one round: runs and latencies pooled, memory at its worst, wall the mean."""
    first = rounds[0]
    return Round(first.n, [run for r in rounds for run in r.runs], sum(r.wall_s for r in rounds) / len(rounds),
                 [max(values) for values in zip(*(r.tree_peak_kib for r in rounds), strict=True)],
                 [max(values) for values in zip(*(r.run_kib for r in rounds), strict=True)],
                 [max(values) for values in zip(*(r.server_hwm_kib for r in rounds), strict=True)],
                 [s for r in rounds for s in r.latencies_s], [x for r in rounds for x in r.load])


# -- report ----------------------------------------------------------------------------------------------


def mib(kib: float) -> float:
    return kib / 1024


def table(rounds: list[Round]) -> list[str]:
    """The capacity table, markdown; ratios against the N = 1 round."""
    lines = ["| N | runs completed | p50 run | p95 run | p50 x N=1 | event latency p95 | x N=1 | "
             "peak RSS / server, median (max) | x N=1 | server process VmHWM, max | peak RSS / run, median (max) | x N=1 "
             "| wall | load 1 min |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    if not rounds:
        return lines
    base = rounds[0]
    for r in rounds:
        tree, run = statistics.median(r.tree_peak_kib), statistics.median(r.run_kib)
        lines.append(
            f"| {r.n} | {r.completed}/{len(r.runs)} | {r.run_s(.5):.1f} s | {r.run_s(.95):.1f} s "
            f"| {r.run_s(.5) / base.run_s(.5):.2f}x | {r.latency_ms(.95):.0f} ms | {r.latency_ms(.95) / base.latency_ms(.95):.2f}x "
            f"| {mib(tree):.0f} ({mib(max(r.tree_peak_kib)):.0f}) MiB | {tree / statistics.median(base.tree_peak_kib):.2f}x "
            f"| {mib(max(r.server_hwm_kib)):.0f} MiB | {mib(run):.0f} ({mib(max(r.run_kib)):.0f}) MiB "
            f"| {run / max(1, statistics.median(base.run_kib)):.2f}x | {r.wall_s:.0f} s "
            f"| {max(r.load):.1f} |")
    return lines


def figures(rounds: list[Round], approve: str) -> list[Figure]:
    base, found = rounds[0], []
    for r in rounds:
        lost = sum(run.host_lost for run in r.runs)
        cards = sum(run.answered for run in r.runs)
        cards = f"{cards} cards answered by REST" if approve != "all" else "approve: all"
        note = (f"{r.completed}/{len(r.runs)} completed, {lost} lost a host, p50 {r.run_s(.5):.1f} s, {cards}; "
                f"load average (1 min) after each round: {', '.join(f'{x:.1f}' for x in r.load)}")
        found += [
            figure(f"N={r.n} students: runs completed", [r.completed], "runs", target=Target(">=", len(r.runs)),
                   group="hub_capacity", note=f"{len(r.runs) // r.n} rounds of {r.n}"),
            figure(f"N={r.n} students: run time p95", [r.run_s(.95)], "s", baseline=("N=1", base.run_s(.95)),
                   group="hub_capacity", note=note),
            figure(f"N={r.n} students: event latency to the follower p95", [r.latency_ms(.95)], "ms",
                   baseline=("N=1", base.latency_ms(.95)), group="hub_capacity",
                   note=f"{len(r.latencies_s)} events, max {max(r.latencies_s) * 1000:.0f} ms"),
            figure(f"N={r.n} students: peak RSS per server (tree)", [mib(k) for k in r.tree_peak_kib], "MiB",
                   baseline=("N=1", mib(statistics.median(base.tree_peak_kib))), group="hub_capacity",
                   note=f"server process VmHWM max {mib(max(r.server_hwm_kib)):.0f} MiB"),
            figure(f"N={r.n} students: peak RSS per run", [mib(k) for k in r.run_kib], "MiB",
                   baseline=("N=1", mib(statistics.median(base.run_kib))), group="hub_capacity"),

        ]
    return found


def stop_reason(rounds: list[Round]) -> str | None:
    last, base = rounds[-1], rounds[0]
    if last.completed < len(last.runs):
        return f"{len(last.runs) - last.completed} of {len(last.runs)} runs did not complete"
    if len(rounds) > 1 and last.run_s(.5) > SLOWDOWN_STOP * base.run_s(.5):
        return f"p50 run time {last.run_s(.5):.1f} s passed {SLOWDOWN_STOP:g}x N=1 ({base.run_s(.5):.1f} s)"
    return None


async def bench(counts: tuple[int, ...], approve: str, budget_s: float, timeout: float, repeat: int) -> tuple[list[Round], str]:
    """The rounds measured, and why they stopped."""
    from hub_fixtures import start_hub

    names = [f"s{i:02d}" for i in range(1, max(counts) + 1)]
    request, rounds, began, stopped = body(approve), [], time.monotonic(), f"all rounds ran (N up to {max(counts)})"
    with tempfile.TemporaryDirectory(prefix="besser-bench-hub-") as workdir:
        hub = start_hub(Path(workdir), {"BESSER_HUB_USERS": ",".join(names)})
        try:
            room = Classroom(hub)
            for n in counts:
                if rounds:  # the next round, its warm-up and its spawns scale with n: does it fit?
                    previous = rounds[-1]
                    guess = previous.wall_s * n / previous.n * (repeat + 1) + 10
                    if time.monotonic() - began + guess > budget_s:
                        stopped = f"stopped before N={n}: about {guess:.0f} s more would pass the {budget_s:.0f} s budget"
                        print(stopped, flush=True)
                        break
                rounds.append(pooled([await round_of(room, names[:n], request, timeout) for _ in range(repeat)]))
                print(table(rounds)[-1], flush=True)
                reason = stop_reason(rounds)
                if reason:
                    stopped = f"stopped after N={n}: {reason}"
                    print(stopped, flush=True)
                    break
        finally:
            hub.stop()
    return rounds, stopped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default=",".join(map(str, ROUNDS)), help="the rounds' student counts (the first is the baseline)")
    parser.add_argument("--budget", type=float, default=540.0,
                        help="seconds the whole bench may take (a round that would not fit is skipped)")
    parser.add_argument("--approve", choices=("script", "all"), default="script",
                        help="script: approve: none and each card answered by REST (default); all: approve: all")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a round may take")
    parser.add_argument("--repeat", type=int, default=3, help="times each N is run (runs pooled, memory at its worst)")
    args = parser.parse_args()
    from hub_fixtures import proxy_missing

    reason = proxy_missing()
    if reason:
        print(f"no hub here: {reason}")
        emit([])
        return
    counts = tuple(int(n) for n in args.n.split(","))
    cpus = len(os.sched_getaffinity(0))
    print(f"N students on a local JupyterHub, one demo run each at once, {args.repeat} times per N "
          f"(replay; cards: {args.approve}); "
          f"{cpus} cores, {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.1f} GiB", flush=True)
    print("\n".join(table([])), flush=True)
    rounds, stopped = asyncio.run(bench(counts, args.approve, args.budget, args.timeout, args.repeat))
    print()
    print("\n".join(table(rounds)))
    cards = "a script answers each card by REST" if args.approve == "script" else "approve: all"
    emit_table("Hub capacity: N students, one demo run each at once", [
        f"Local JupyterHub, one single-user server per student, replay provider, {cards}; {args.repeat} rounds per N, "
        f"runs pooled; {cpus} cores. {stopped[0].upper()}{stopped[1:]}.", "", *table(rounds)])
    emit(figures(rounds, args.approve))


if __name__ == "__main__":
    main()
