# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""Loading a model file is bounded, and a server run loads it off the event loop (G0 finding 6).

The family: model files that cost far more to load than their size suggests. ``a = a + a``
forty times (530 bytes) used to end in a raw ``MemoryError``; ``t = (t, t)`` makes a value
exponentially expensive to hash; thousands of ``add_type`` calls cost quadratic time inside
BESSER; deep nesting; JSON with too many elements or nested values; a file over the size cap.
Each is refused with a named code (``too_large``, ``not_a_model`` or ``invalid_model``) at
every entry point that loads a model file (the Python API, the command line, REST ``POST
runs`` with ``model_path``), with nothing written; and while a REST run loads the most
expensive of them, the server's event loop keeps answering (lag under 100 ms).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from file_tool_helpers import tree_state
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    runs_dir,
)

from kernel_ext.errors import ToolFailure
from kernel_ext.model.jsonform import FORMAT
from kernel_ext.model.loading import MAX_MODEL_FILE_BYTES, load_model
from kernel_ext.server.handlers.base import STATE_KEY

REPO = Path(__file__).resolve().parents[2]
HEAD = "from besser.BUML.metamodel.structural import *\n"


def _json(document: dict) -> str:
    return json.dumps({"format": FORMAT, "version": 1, "name": "M", **document})


# payload -> (file name, content, the code it is refused with)
PAYLOADS = {
    "string_doubling": ("m.py", "a = 'x'\n" + "a = a + a\n" * 40, "too_large"),
    "tuple_dag_hash": ("m.py", "t = (1, 2)\n" + "t = (t, t)\n" * 40 + "s = {t}\n", "too_large"),
    "list_copies": ("m.py", "t = [1]\n" + "t = list([t, t, t, t])\n" * 40, "too_large"),
    # Each value under its own cap, thousands of them together: the sum is bounded (64 MiB).
    "many_strings": ("m.py", "a = 'x'\n" + "a = a + a\n" * 17 + "".join(f"b{i} = a + '1'\n" for i in range(6000)), "too_large"),
    "many_list_copies": ("m.py", "t = [" + "0, " * 20_000 + "]\n" + "".join(f"b{i} = list(t)\n" for i in range(3000)), "too_large"),
    "quadratic_add_type": ("m.py", HEAD + "m = DomainModel(name='M')\n"
                           + "".join(f"m.add_type(Class(name='K{i}'))\n" for i in range(9000)), "too_large"),
    "deep_nesting": ("m.py", "x = " + "[" * 5000 + "]" * 5000 + "\n", "not_a_model"),
    "over_the_size_cap": ("m.py", "#" * (MAX_MODEL_FILE_BYTES + 1) + "\n", "too_large"),
    "json_deep": ("m.json", '{"format": ' + "[" * 200_000 + "]" * 200_000 + "}", "not_a_model"),
    "json_too_many_elements": ("m.json", _json({"classes": [{"name": f"K{i}"} for i in range(20_001)]}), "too_large"),
    "json_nested_default": ("m.json", _json({"classes": [{"name": "K", "attributes": [
        {"name": "a", "type": "str", "default": [[[[["x"]]]]]}]}]}), "invalid_model"),
}


def write(tmp_path: Path, payload: str) -> Path:
    name, content, _ = PAYLOADS[payload]
    folder = tmp_path / "models"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(content)
    return path


@pytest.mark.timeout(600)  # the CLI's own bound is 300 s
@pytest.mark.parametrize("payload", list(PAYLOADS))
@pytest.mark.parametrize("entry", ["api", "cli"])
def test_an_expensive_model_file_is_refused_by_name(tmp_path, payload, entry):
    source = write(tmp_path, payload)
    code = PAYLOADS[payload][2]
    out = tmp_path / "out"
    (tmp_path / "cwd").mkdir()
    before = tree_state(tmp_path)
    if entry == "api":
        with pytest.raises(ToolFailure) as refused:
            load_model(source)
        assert refused.value.code == code, refused.value.message
        assert "MemoryError" not in refused.value.message and "RecursionError" not in refused.value.message
        if payload.startswith("many_"):
            assert re.search(r"line \d+: values of more than 64 MiB in all", refused.value.message), refused.value.message
    else:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-m", "kernel_ext", "generate", str(source), "--out", str(out)],
                              cwd=tmp_path / "cwd", env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 2 and f"error: {code}:" in done.stderr, done.stderr[-2000:]
        assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert not out.exists()
    assert tree_state(tmp_path) == before


async def _max_lag_while(task: asyncio.Future, tick: float = 0.01) -> float:
    """The longest this loop's thread was kept busy while an ``asyncio.sleep(tick)`` overslept, until
    ``task`` ended: each oversleep counts no more than the CPU the loop's thread spent in it, so a
    loop only descheduled by a busy machine (or waiting on the GIL while a worker did the work off
    the loop) is not charged (``tests/security/loop_lag.py`` says why)."""
    worst = 0.0
    while not task.done():
        started, cpu = time.perf_counter(), time.thread_time()
        await asyncio.sleep(tick)
        worst = max(worst, min(time.perf_counter() - started - tick, time.thread_time() - cpu))
    return worst


@pytest.mark.parametrize("payload", ["quadratic_add_type", "tuple_dag_hash", "json_too_many_elements", "many_strings"])
async def test_a_rest_run_loads_the_model_off_the_loop_and_refuses_it(jp_fetch, jp_serverapp, runs_dir, jp_root_dir, tmp_path,
                                                                     payload, frozen_heap):
    source = write(jp_root_dir, payload)  # REST model paths lie under the server's root (test_sec_model_path.py)
    before = tree_state(source.parent)
    body = {"kind": "generate", "request": "A FastAPI backend", "provider": "none", "model_path": str(source)}
    response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    assert response.code == 201
    run = jp_serverapp.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
    waiting = asyncio.ensure_future(run.wait())
    lag = await _max_lag_while(waiting)
    done = await waiting
    assert done is not None and done.status == "failed"
    errors = [e for e in run.events.events if e.type == "error"]
    assert [e.code for e in errors] == [PAYLOADS[payload][2].upper()]
    assert lag < 0.1, f"the server's event loop was kept busy {lag:.3f} s while the model loaded"
    app = run.context.layout.app_dir
    assert not app.exists() or not any(p.is_file() for p in app.rglob("*"))
    assert sorted(p.name for p in runs_dir.iterdir()) == [run.id]
    assert tree_state(source.parent) == before
