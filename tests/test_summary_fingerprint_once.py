"""A run's request fingerprint is computed once, off the loop, not on every summary (red team 2).

``summarize`` (each ``GET runs/<id>``, each listing of a live run, each POST reply) hashed the
request's whole JSON every time: with 3.3 MB of ``model_json`` that was 0.3-0.5 s of the server's
event loop per GET, and ten concurrent GETs of one run held ``GET config`` 4.7 s (measured over
REST). Checked here on a real ``RunManager``: the fingerprint is stamped when the run starts and
every summary hands out that very string, never a recomputed one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from kernel_ext.hosting.manager import RunManager
from kernel_ext.hosting.requests import fingerprint, parse_request
from kernel_ext.hosting.summaries import summarize


def test_every_summary_hands_out_the_stamped_fingerprint(tmp_path: Path) -> None:
    classes = [{"name": f"C{i}", "attributes": [{"name": f"a{j}", "type": "str"} for j in range(20)]} for i in range(500)]
    request = parse_request({"request": "Generate a FastAPI backend", "model_json": {"name": "M", "classes": classes}})

    async def scenario() -> None:
        manager = RunManager(tmp_path / "runs")
        run = await manager.start_from_request(request)
        stamped = run.context.fingerprint
        assert stamped == fingerprint(request)
        await run.wait()  # the model is not a domain-model document: the run ends at once
        for _ in range(3):
            assert summarize(run).fingerprint is stamped

    asyncio.run(scenario())
