"""What the Jupyter layer costs: loading the magics, and events from the server into a view.

1. ``%load_ext kernel_ext`` in a fresh interpreter with an IPython shell (target <= 300 ms),
   and the first command after it (where the lazy imports are paid), beside the baseline
   ``import IPython`` measured in the same run (fresh interpreter each).
2. 2,000 events from a real jupyter_server (extension loaded, 127.0.0.1) over SSE into a
   ``RunView`` (real ipywidgets, no front end) on a client thread with its own loop, as a
   kernel would follow a run:
   - replay of a finished 2,000-event run: events/s (target >= 1,000), beside the baseline of
     the same events applied to a ``RunView`` straight from memory (no server, no HTTP);
   - a live run emitting 2,000 events at ~2,000 events/s: server-to-widget latency per event
     (emit timestamp -> applied in the view), p50 / p95 / max (target p95 <= 50 ms).

Run: ``.venv/bin/python bench/bench_jupyter.py``
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from common import Figure, Target, emit, figure  # noqa: E402

RUNS = 7
EVENTS = 2000
REPLAYS = 5
BURST, PAUSE_S = 10, 0.005  # live run: 10 events every 5 ms = 2,000 events/s offered
FIGURES: list[Figure] = []  # what main() emits for bench/run_all.py

LOAD_EXT = """
import time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
start = time.perf_counter()
shell.run_line_magic("load_ext", "kernel_ext")
print(time.perf_counter() - start)
"""
FIRST_COMMAND = """
import time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "kernel_ext")
start = time.perf_counter()
shell.run_line_magic("besser", "config")
print(time.perf_counter() - start)
"""
IMPORT_IPYTHON = """
import time
start = time.perf_counter()
import IPython
print(time.perf_counter() - start)
"""


def _figure(samples: list[float], unit: str, scale: float = 1.0) -> str:
    values = [s * scale for s in samples]
    return f"median {statistics.median(values):9.2f} {unit}  (min {min(values):.2f} - max {max(values):.2f})"


def _seconds(code: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BESSER_AGENT_")}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT, env=env)
    return float(out.stdout.strip().splitlines()[-1])


def bench_load_ext() -> None:
    ours, first, base = [], [], []
    for _ in range(RUNS):
        base.append(_seconds(IMPORT_IPYTHON))
        ours.append(_seconds(LOAD_EXT))
        first.append(_seconds(FIRST_COMMAND))
    print("1. loading the magics (fresh interpreter each time)")
    print(f"   %load_ext kernel_ext            {_figure(ours, 'ms', 1000)}   target <= 300 ms")
    print(f"   then the first %besser config   {_figure(first, 'ms', 1000)}   (imports pydantic, httpx: paid once, on use)")
    print(f"   baseline: import IPython        {_figure(base, 'ms', 1000)}")
    ms = lambda values: [v * 1000 for v in values]  # noqa: E731
    FIGURES.append(figure("%load_ext kernel_ext", ms(ours), "ms", baseline=("import IPython", ms(base)), target=Target("<=", 300),
                          note="the same modules load as before 2026-12 (kernel_ext, magics, magics.commands, version); "
                               "timed side by side on one machine the earlier tree takes 3.3-5.3 ms too: the 0.82 ms "
                               "of the earlier table was a quieter machine"))
    FIGURES.append(figure("first %besser config after load_ext", ms(first), "ms", baseline=("import IPython", ms(base))))


# -- events -----------------------------------------------------------------------------------


def emit_pattern(events, count: int, pause=None):
    """A plausible run: phases, calls and results, cost ticks, findings, a card every 100 events."""
    events.emit("run_started", request="bench: replayed events", provider_label="replay:bench", provider_kind="replay", sandbox_tier="bwrap")
    n, i = 1, 0
    phases = ("select", "generate", "gap", "customize", "validate")
    while n < count - 1:
        k = i % 100
        if k == 0:
            events.emit("phase", phase=phases[(i // 100) % 5], status="started")
        elif k == 50:
            call = f"call-{i}"
            events.emit("approval_requested", call_id=call, name="write_file", category="edit", request={"arguments": {"path": f"f{i}.py"}, "proposal": "+x\n"})
        elif k == 51:
            events.emit("approval_resolved", call_id=f"call-{i - 1}", name="write_file", approved=True, by="card")
        elif k % 4 == 1:
            events.emit("tool_call", call_id=f"c{i}", name="read_file", summary=f"path=f{i}.py", arguments={"path": f"f{i}.py"})
        elif k % 4 == 2:
            events.emit("tool_result", call_id=f"c{i - 1}", name="read_file", ok=True, summary="ok")
        elif k % 4 == 3:
            events.emit("cost", input_tokens=10 * i, output_tokens=i, cost_usd=i / 1e5, turns=i // 4, elapsed_s=i / 100)
        else:
            events.emit("text", text=f"step {i}")
        n, i = n + 1, i + 1
        if pause is not None and n % BURST == 0:
            yield
    events.emit("done", status="completed", summary="bench")


class Follower(threading.Thread):
    """A kernel stand-in: its own loop, ``ServerClient.follow`` into a ``RunView``."""

    def __init__(self, url: str, token: str, run_id: str):
        super().__init__(daemon=True)
        self.url, self.token, self.run_id = url, token, run_id
        self.latencies: list[float] = []
        self.elapsed = 0.0
        self.state = None

    def run(self) -> None:
        asyncio.run(self._follow())

    async def _follow(self) -> None:
        from kernel_ext.magics.client import ServerClient
        from widgets.runview import RunView

        view = RunView()
        latencies = self.latencies

        def apply(event: dict) -> None:
            view.apply(event)
            latencies.append(time.time() - event["ts"])

        start = time.perf_counter()
        await ServerClient(self.url, self.token).follow(self.run_id, apply)
        self.elapsed = time.perf_counter() - start
        self.state = view.state


async def bench_server(workdir: Path) -> None:
    from jupyter_server.serverapp import ServerApp

    from kernel_ext.hosting.bus import EventLog
    from kernel_ext.hosting.layout import RunLayout
    from kernel_ext.server.auth import ENV_TOKEN, ENV_URL
    from kernel_ext.server.handlers.base import STATE_KEY
    from widgets.runview import RunView

    runs = workdir / "runs"
    finished = RunLayout.create(runs, "bench-replay-2000")
    log = EventLog(finished.run_id, finished.events_path)
    for _ in emit_pattern(log, EVENTS):
        pass
    log.close_file()
    recorded = EventLog.load(finished.run_id, finished.events_path).events
    assert len(recorded) == EVENTS

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ServerApp.clear_instance()
    app = ServerApp.instance()
    app.init_signal = lambda: None
    app.initialize(argv=[
        f"--ServerApp.root_dir={workdir}", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False", "--ServerApp.allow_root=True", "--ServerApp.log_level=WARN",
        "--ServerApp.jpserver_extensions={'kernel_ext': True}", f"--BesserAgentApp.runs_dir={runs}",
    ])
    try:
        url, token = os.environ.pop(ENV_URL), os.environ.pop(ENV_TOKEN)

        replay, direct = [], []
        for _ in range(REPLAYS):
            follower = Follower(url, token, finished.run_id)
            follower.start()
            await asyncio.to_thread(follower.join)
            assert follower.state.status == "completed" and follower.state.event_count == EVENTS
            replay.append(EVENTS / follower.elapsed)
            start = time.perf_counter()
            RunView().replay(recorded)
            direct.append(EVENTS / (time.perf_counter() - start))

        manager = app.web_app.settings[STATE_KEY].manager

        async def live_body(ctx) -> None:
            for _ in emit_pattern(ctx.events, EVENTS, pause=True):
                await asyncio.sleep(PAUSE_S)

        run = manager.start_body(live_body)
        follower = Follower(url, token, run.id)
        follower.start()
        await run.wait()
        await asyncio.to_thread(follower.join)
        assert follower.state.event_count == EVENTS, follower.state.event_count
        lat = sorted(follower.latencies)
        p95 = lat[int(0.95 * (len(lat) - 1))]
    finally:
        await app._cleanup()
        ServerApp.clear_instance()

    print(f"2. {EVENTS} events from the server (SSE, 127.0.0.1) into a RunView on a client thread")
    print(f"   replay of a finished run        {_figure(replay, 'events/s')}   target >= 1,000")
    print(f"   baseline: RunView from memory   {_figure(direct, 'events/s')}")
    print(
        f"   live run at ~{int(BURST / PAUSE_S)} events/s offered: latency emit -> view  p50 {statistics.median(lat) * 1000:.1f} ms"
        f"  p95 {p95 * 1000:.1f} ms  max {lat[-1] * 1000:.1f} ms   target p95 <= 50 ms"
    )
    FIGURES.append(figure(f"replay {EVENTS} events server -> RunView", replay, "events/s",
                          baseline=("RunView from memory", direct), target=Target(">=", 1000)))
    p50 = statistics.median(lat) * 1000
    FIGURES.append(figure("live event latency emit -> view, p95", [p95 * 1000], "ms", target=Target("<=", 50),
                          note=f"one live run of {EVENTS} events; p50 {p50:.1f} ms, max {lat[-1] * 1000:.1f} ms"))


def main() -> None:
    bench_load_ext()
    with tempfile.TemporaryDirectory() as workdir:
        asyncio.run(bench_server(Path(workdir)))
    emit(FIGURES)


if __name__ == "__main__":
    main()
