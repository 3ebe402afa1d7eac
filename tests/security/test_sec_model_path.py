# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""REST ``model_path`` names a file under the server's root, opened through the fence.

The class: a ``POST runs`` body makes the server (its OS user, its files) read a path. A path
outside the server's root (absolute, or climbing with ``..``) is refused before a run exists
(400 ``MODEL_PATH_OUTSIDE_ROOT``, nothing written); so is a path under the root that passes through
a link, or names a link, a FIFO or a folder (400, by the fence's name for it), and the run's own
fenced read refuses the same, without reading anything outside and without waiting on the FIFO
(tests/security/test_sec_named_files.py holds every field that names a file to this rule). The magics reach the same route (they
POST ``model_path``); the CLI and the Python API load the caller's own paths by design. A model
file under the root loads as before.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from file_tool_helpers import tree_state
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    runs_dir,
)
from tornado.httpclient import HTTPClientError

from kernel_ext.server.handlers.base import STATE_KEY

MODEL = (
    "from besser.BUML.metamodel.structural import Class, DomainModel, Property, StringType\n"
    'book = Class(name="Book", attributes={Property(name="title", type=StringType)})\n'
    'library = DomainModel(name="Library", types={book})\n'
)


@pytest.fixture
def places(jp_root_dir: Path, tmp_path: Path) -> dict[str, Path]:
    """A model outside the root (the host), and under the root: a link to it, a linked folder, a FIFO."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "model.py").write_text(MODEL)
    (jp_root_dir / "models").mkdir()
    (jp_root_dir / "models" / "model.py").write_text(MODEL)
    os.symlink(outside / "model.py", jp_root_dir / "models" / "link.py")
    os.symlink(outside, jp_root_dir / "linked_folder")
    os.mkfifo(jp_root_dir / "models" / "fifo.py")
    return {"outside": outside, "root": jp_root_dir}


# case -> (model_path, where it is relative to, the refusal: (HTTP 400 code) or (run error code))
REFUSED_BEFORE_A_RUN = {
    "absolute_outside": ("outside/model.py", "tmp"),
    "climbing_relative": ("../outside/model.py", None),
    "climbing_absolute": ("root/../outside/model.py", "tmp_raw"),
    "proc_environ": ("/proc/self/environ", None),
}
REFUSED_BY_THE_RUN = {
    "link_to_a_host_file": ("models/link.py", "SYMLINK_REFUSED"),
    "through_a_linked_folder": ("linked_folder/model.py", "SYMLINK_REFUSED"),
    "fifo": ("models/fifo.py", "NOT_REGULAR_FILE"),
    "a_folder": ("models", "NOT_REGULAR_FILE"),
}


def _body(model_path: str) -> str:
    return json.dumps({"kind": "generate", "request": "A FastAPI backend", "provider": "none", "model_path": model_path})


def _path(places, tmp_path: Path, text: str, base: str | None) -> str:
    if base == "tmp":
        return str(tmp_path / text)
    if base == "tmp_raw":  # not normalised: the '..' is in the text the server gets
        return f"{tmp_path}/{text}".replace("root/", places["root"].name + "/")
    return text


@pytest.mark.parametrize("case", list(REFUSED_BEFORE_A_RUN))
async def test_a_model_path_outside_the_root_is_refused_before_a_run(jp_fetch, jp_serverapp, runs_dir, places, tmp_path, case):
    text, base = REFUSED_BEFORE_A_RUN[case]
    before = tree_state(tmp_path)
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("besser-agent", "runs", method="POST", body=_body(_path(places, tmp_path, text, base)))
    assert refused.value.code == 400
    answer = json.loads(refused.value.response.body)
    assert answer["code"] == "MODEL_PATH_OUTSIDE_ROOT", answer
    assert list(runs_dir.iterdir()) == []  # no run, nothing written
    assert tree_state(tmp_path) == before


@pytest.mark.parametrize("case", list(REFUSED_BY_THE_RUN))
async def test_a_model_path_through_a_link_or_to_a_special_file_is_refused_by_name(jp_fetch, jp_serverapp, runs_dir, places, tmp_path,
                                                                                    case):
    """Refused before a run too (the request's files are opened, never read, when it arrives), and
    by the run's own fenced read, should the file be swapped after the request was accepted."""
    from kernel_ext.errors import ToolFailure
    from kernel_ext.model.loading import load_model

    text, code = REFUSED_BY_THE_RUN[case]
    guarded = tree_state(places["outside"], places["root"])
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("besser-agent", "runs", method="POST", body=_body(text))
    assert refused.value.code == 400
    assert json.loads(refused.value.response.body)["code"] == code
    assert list(runs_dir.iterdir()) == []  # no run, nothing written
    with pytest.raises(ToolFailure) as read:
        await asyncio.wait_for(asyncio.to_thread(load_model, places["root"] / text, root=places["root"]), 60)  # never waits
    assert read.value.code == code.lower()
    assert tree_state(places["outside"], places["root"]) == guarded


@pytest.mark.parametrize("form", ["relative", "absolute"])
async def test_a_model_under_the_root_still_loads(jp_fetch, jp_serverapp, runs_dir, places, form):
    text = "models/model.py" if form == "relative" else str(places["root"] / "models" / "model.py")
    response = await jp_fetch("besser-agent", "runs", method="POST", body=_body(text))
    assert response.code == 201
    run = jp_serverapp.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
    await asyncio.wait_for(_past_loading(run), 60)
    assert not [e for e in run.events.events if e.type == "error" and e.code in ("NOT_FOUND", "OUTSIDE_WORKSPACE", "SYMLINK_REFUSED")]
    assert any(e.type == "run_started" for e in run.events.events)
    run.cancel()
    await asyncio.wait_for(run.wait(), 120)


async def _past_loading(run) -> None:
    while not any(e.type in ("phase", "done") for e in run.events.events):
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("case", ["fifo", "a_folder"])
def test_the_library_loader_never_waits_on_a_fifo(places, case):
    """Without a root (library, CLI) the path is the caller's, but a FIFO is refused, never waited on."""
    from kernel_ext.errors import ToolFailure
    from kernel_ext.model.loading import load_model

    path = places["root"] / REFUSED_BY_THE_RUN[case][0]
    with pytest.raises(ToolFailure) as refused:
        load_model(path)
    assert refused.value.code == "not_regular_file"
