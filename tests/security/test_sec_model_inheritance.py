# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""An inheritance graph that BESSER would walk forever is refused by name before it does.

The family: BESSER's ``all_parents()``/``all_specializations()`` recurse over every path
without memoising, and its ``Generalization`` setters and ``validate()`` call them; the
"diamond ladder" (``ladder.py``) of depth 40, a 9 KB file, pinned a thread at 100 % forever
(a REST run could neither time out nor be cancelled). ``model/inheritance.py`` bounds the
graph first, in every form (JSON, PlantUML, safe Python, a DomainModel object) and so at every
entry point that loads a model: the Python API (``load_model``, ``generate``), the command
line (``generate``), REST ``POST runs`` with ``model_path`` and with ``model_json`` (the
``%besser`` magics load through ``load_model`` and send ``model_json``). Each is refused with
``too_large`` naming a class, nothing is written, and a REST run leaves the server's event loop
under its 100 ms lag bound. A timeout is the hang detector, never a speed assertion. Cycles
are refused as ``invalid_model`` (BESSER recursed until ``RecursionError``); ordinary
inheritance still loads.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from file_tool_helpers import tree_state
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    runs_dir,
)

from kernel_ext.errors import ToolFailure
from kernel_ext.model.loading import load_model
from kernel_ext.server.handlers.base import STATE_KEY

from .ladder import SUFFIX, ladder_json, ladder_object, ladder_text
from .loop_lag import LoopLag

REPO = Path(__file__).resolve().parents[2]
HANG_S = 120  # a hang detector: the refusal itself takes well under a second
DEPTH = 40
FORMS = ["json", "plantuml", "python"]


def _write(folder: Path, form: str, depth: int = DEPTH) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"diamond{SUFFIX[form]}"
    path.write_text(ladder_text(depth, form))
    return path


def _in_thread(function, *args: Any, **kwargs: Any) -> Any:
    """``function(...)``'s result or exception; fails (instead of hanging) past ``HANG_S``."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(HANG_S)
    if worker.is_alive():
        pytest.fail(f"{getattr(function, '__name__', function)} did not return within {HANG_S} s: the load hangs")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _assert_named(failure: ToolFailure) -> None:
    assert failure.code == "too_large", failure.message
    assert re.search(r"inheritance of [AB]\d+ has more than \d+ paths to its (ancestors|descendants)", failure.message), failure.message
    assert "RecursionError" not in failure.message and "\n" not in failure.message


def _generate_api(source: Any, runs: Path) -> Any:
    import kernel_ext

    return kernel_ext.generate(source, "A FastAPI backend", runs_dir=runs, provider="none")


@pytest.mark.parametrize("form", [*FORMS, "object"])
@pytest.mark.parametrize("entry", ["load_model", "generate"])
def test_the_diamond_ladder_is_refused_by_the_python_api(tmp_path, form, entry):
    source = ladder_object(DEPTH) if form == "object" else _write(tmp_path / "models", form)
    runs = tmp_path / "runs"
    before = tree_state(tmp_path)
    with pytest.raises(ToolFailure) as refused:
        if entry == "load_model":
            _in_thread(load_model, source)
        else:
            _in_thread(_generate_api, source, runs)
    _assert_named(refused.value)
    assert not runs.exists()
    assert tree_state(tmp_path) == before


@pytest.mark.parametrize("form", FORMS)
def test_the_diamond_ladder_is_refused_by_the_cli(tmp_path, form):
    source = _write(tmp_path / "models", form)
    out = tmp_path / "out"
    (tmp_path / "cwd").mkdir()
    before = tree_state(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "kernel_ext", "generate", str(source), "--out", str(out)],
                          cwd=tmp_path / "cwd", env=env, capture_output=True, text=True, timeout=HANG_S, check=False)
    assert done.returncode == 2 and "error: too_large:" in done.stderr and "paths to its" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not out.exists()
    assert tree_state(tmp_path) == before


@pytest.mark.parametrize("entry", [*(f"model_path:{form}" for form in FORMS), "model_json"])
async def test_a_rest_run_refuses_the_diamond_ladder_and_the_loop_keeps_ticking(jp_fetch, jp_serverapp, jp_root_dir, runs_dir, entry,
                                                                                frozen_heap):
    body: dict[str, Any] = {"kind": "generate", "request": "A FastAPI backend", "provider": "none", "max_runtime_s": 20}
    models = jp_root_dir / "models"
    if entry == "model_json":
        body["model_json"] = ladder_json(DEPTH)
        models.mkdir()
    else:
        body["model_path"] = str(_write(models, entry.partition(":")[2]))
    before = tree_state(models)
    warm_up = await _first_run(jp_fetch, jp_serverapp)
    async with LoopLag() as lag:
        start = lag.ticks[-1].end
        response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
        assert response.code == 201
        run = jp_serverapp.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
        done = await asyncio.wait_for(run.wait(), HANG_S)
        window = (start, lag.ticks[-1].end)
    assert done is not None and done.status == "failed"
    errors = [e for e in run.events.events if e.type == "error"]
    assert [e.code for e in errors] == ["TOO_LARGE"] and "paths to its" in errors[0].message, errors
    lag.check(*window, "loading the model")
    app = run.context.layout.app_dir
    assert not app.exists() or not any(p.is_file() for p in app.rglob("*"))
    assert sorted(p.name for p in runs_dir.iterdir()) == sorted([warm_up, run.id])
    assert tree_state(models) == before


async def _first_run(jp_fetch, app) -> str:
    """A first run with an empty model (refused, ``empty_model``): the server's first ``POST runs``
    imports the run modules on the loop, a one-time cost that is not this class's."""
    body = {"kind": "generate", "request": "warm-up", "provider": "none", "model_json": {**ladder_json(0), "classes": []}}
    response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    run = app.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
    await asyncio.wait_for(run.wait(), HANG_S)
    assert [e.code for e in run.events.events if e.type == "error"] == ["EMPTY_MODEL"]
    return run.id


CYCLES = {
    "json": lambda: json.dumps({**ladder_json(1), "generalizations": [{"general": "A0", "specific": "A1"},
                                                                       {"general": "A1", "specific": "A0"}]}),
    "plantuml": lambda: "@startuml\nclass A0 {\n}\nclass A1 {\n}\nA0 <|-- A1\nA1 <|-- A0\n@enduml\n",
    "python": lambda: ("from besser.BUML.metamodel.structural import *\nA0 = Class(name='A0')\nA1 = Class(name='A1')\n"
                       "g1 = Generalization(general=A0, specific=A1)\ng2 = Generalization(general=A1, specific=A0)\n"
                       "m = DomainModel(name='M', types={A0, A1}, generalizations={g1, g2})\n"),
    # the evaluator checks a Generalization re-pointed by assignment too, before BESSER's setter walks it
    "python_assignment": lambda: ("from besser.BUML.metamodel.structural import *\nA0 = Class(name='A0')\nA1 = Class(name='A1')\n"
                                  "A2 = Class(name='A2')\ng1 = Generalization(general=A0, specific=A1)\n"
                                  "g2 = Generalization(general=A1, specific=A2)\ng2.specific = A0\n"
                                  "m = DomainModel(name='M', types={A0, A1, A2}, generalizations={g1, g2})\n"),
}


@pytest.mark.parametrize("form", list(CYCLES))
def test_circular_inheritance_is_refused_by_name(tmp_path, form):
    path = tmp_path / f"cycle{SUFFIX[form.partition('_')[0]]}"
    path.write_text(CYCLES[form]())
    before = tree_state(tmp_path)
    with pytest.raises(ToolFailure) as refused:
        _in_thread(load_model, path)
    assert refused.value.code == "invalid_model" and "inheritance is circular" in refused.value.message, refused.value.message
    if form == "python_assignment":  # refused at the assignment, before BESSER's setter ran
        assert "line 7:" in refused.value.message, refused.value.message
    assert tree_state(tmp_path) == before


@pytest.mark.parametrize("form", [*FORMS, "object"])
def test_ordinary_inheritance_still_loads(tmp_path, form):
    """A shallow ladder (2,047 paths at its foot) loads in every form."""
    source = ladder_object(10) if form == "object" else _write(tmp_path, form, depth=10)
    model = _in_thread(load_model, source)
    assert {c.name for c in model.get_classes()} >= {"A0", "B10"}


def test_the_shipped_examples_still_load():
    from kernel_ext.model.examples import synthetic_model

    assert load_model("example:library").get_classes()
    assert len(load_model(synthetic_model(1000)).get_classes()) == 1000
