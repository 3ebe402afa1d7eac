"""What the provider layer costs on top of what it cannot avoid.

1. Import: ``import kernel_ext.providers`` (what ``%load_ext`` pays) against ``import httpx``
   (what it would pay if the HTTP client were imported eagerly), fresh interpreter each time.
2. Streaming: one OpenAI-style reply of many small SSE events (text deltas, then a tool call
   whose arguments arrive in as many fragments) from a loopback server, consumed through
   ``OpenAICompatProvider.stream`` against the floor: the same bytes read as lines with
   plain httpx. Same server, same run, interleaved.

Run: ``.venv/bin/python bench/bench_providers.py``
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from common import Figure, emit, figure  # noqa: E402

RUNS = 7
DELTAS = 2000
FIGURES: list[Figure] = []  # what main() emits for bench/run_all.py


def _figure(samples: list[float], unit: str, scale: float = 1.0) -> str:
    values = [s * scale for s in samples]
    return f"median {statistics.median(values):8.2f} {unit}  (min {min(values):.2f} - max {max(values):.2f})"


def bench_import() -> None:
    def timed(statement: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True, cwd=ROOT)
        return time.perf_counter() - start

    empty, ours, eager = [], [], []
    for _ in range(RUNS):
        empty.append(timed("pass"))
        ours.append(timed("import kernel_ext.providers"))
        eager.append(timed("import httpx"))
    base = statistics.median(empty)
    print(f"interpreter start (subtracted)      {_figure(empty, 'ms', 1000)}")
    print(f"import kernel_ext.providers         {_figure([t - base for t in ours], 'ms', 1000)}")
    print(f"baseline: import httpx              {_figure([t - base for t in eager], 'ms', 1000)}")
    FIGURES.append(figure("import kernel_ext.providers (minus interpreter start)", [(t - base) * 1000 for t in ours], "ms",
                          baseline=("import httpx", [(t - base) * 1000 for t in eager])))


def bench_stream() -> None:
    import httpx
    from provider_server import Plan, ProviderServer, openai_stream

    from kernel_ext.providers import Conversation
    from kernel_ext.providers.openai_compat import OpenAICompatProvider

    arguments = json.dumps({"path": "app/main.py", "content": "x" * DELTAS})
    body = openai_stream(["tok "] * DELTAS, [("call_1", "write_file", [arguments[i : i + 1] for i in range(len(arguments))])])
    events = len(body)
    server = ProviderServer().start()
    conv = Conversation()
    conv.user("go")

    async def through_provider(provider: OpenAICompatProvider) -> float:
        server.plan(Plan(chunks=body))
        start = time.perf_counter()
        count = 0
        async for _ in provider.stream(conv):
            count += 1
        assert count == DELTAS + 2  # text deltas + one tool call + stop
        return time.perf_counter() - start

    async def raw_lines(client: httpx.AsyncClient) -> float:
        server.plan(Plan(chunks=body))
        start = time.perf_counter()
        async with client.stream("POST", server.url + "/v1/chat/completions", json={"stream": True}) as response:
            async for _ in response.aiter_lines():
                pass
        return time.perf_counter() - start

    async def main() -> tuple[list[float], list[float]]:
        provider = OpenAICompatProvider(model="bench", base_url=server.url + "/v1", api_key=None)
        client = httpx.AsyncClient(trust_env=False)
        ours, floor = [], []
        await through_provider(provider)  # warm both connections
        await raw_lines(client)
        for _ in range(RUNS):
            ours.append(await through_provider(provider))
            floor.append(await raw_lines(client))
        await provider.aclose()
        await client.aclose()
        return ours, floor

    try:
        ours, floor = asyncio.run(main())
    finally:
        server.stop()
    print(f"stream of {events} SSE events, through the provider   {_figure(ours, 'ms', 1000)}")
    print(f"baseline: same bytes as lines with plain httpx  {_figure(floor, 'ms', 1000)}")
    print(f"per event, provider overhead over the floor: {(statistics.median(ours) - statistics.median(floor)) / events * 1e6:.1f} us")
    FIGURES.append(figure(f"provider stream of {events} SSE events", [t * 1000 for t in ours], "ms",
                          baseline=("plain httpx aiter_lines", [t * 1000 for t in floor]),
                          note="since 2026-12 (G7) every chunk is counted against the reply's limits and the run's "
                               "budget, bytes are decoded strictly and lines split on CR/LF only (was 1.67x)"))


def main() -> None:
    print(f"provider layer, {RUNS} runs each")
    bench_import()
    bench_stream()
    emit(FIGURES)


if __name__ == "__main__":
    main()
