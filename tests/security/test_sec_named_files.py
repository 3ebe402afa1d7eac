# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""Every file a request names is held like ``model_path`` (issue 28, item 2).

The fields that name a file: ``model_path``, and ``provider`` as ``scripted:FILE`` or
``replay:CASSETTE`` (``base_run_id`` names a run folder, held to a run id). Each is offered a FIFO,
``/dev/zero``, a 1 TiB sparse file, a link out of the root, a path through a linked folder, a ``../``
path, an absolute path outside the root (one that exists, one that does not) and a folder, through:

- REST on a real Jupyter server: ``POST runs`` answers 400 with one named line and no run, nothing
  on disk changes, and the server's loop keeps answering ``GET config`` meanwhile (``LoopLag``);
- a real kernel's ``%besser generate`` against that server: one ``UsageError`` line, no run;
- the Python API (``generate``), whose paths are the caller's own (no root): what it cannot read
  (a FIFO, a device, a huge file, a folder) is refused before anything is written.

A path outside the root gets the same answer whether a file is there or not. The run's own read
(if a file is swapped after the request was accepted) goes through the same fence, off the loop.
The CLI hands nothing to a server (``generate`` runs in its own process), so it is the API's case.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import stat
import time
from pathlib import Path

import pytest
from jupyter_fixtures import (  # noqa: F401
    async_client,
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    runs_dir,
)
from kernel_driver import KernelDriver, kernel_env
from tornado.httpclient import HTTPClientError

from kernel_ext.errors import ToolFailure
from kernel_ext.providers.sources import SHIPPED
from kernel_ext.server.handlers.base import STATE_KEY

from .loop_lag import BOUND_S, LoopLag

MODEL = (
    "from besser.BUML.metamodel.structural import Class, DomainModel, Property, StringType\n"
    'book = Class(name="Book", attributes={Property(name="title", type=StringType)})\n'
    'library = DomainModel(name="Library", types={book})\n'
)
SCRIPT = json.dumps({"name": "hello", "turns": [{"text": "hello"}]})
FILES = {"model_path": "model.py", "scripted": "script.json", "replay": "tape.cassette.jsonl"}
OUTSIDE_CODE = {"model_path": "MODEL_PATH_OUTSIDE_ROOT", "scripted": "PROVIDER_PATH_OUTSIDE_ROOT",
                "replay": "PROVIDER_PATH_OUTSIDE_ROOT"}
OUTSIDE = "outside"  # the field's own code for a path outside the root
# case -> (the path, given the root, the outside folder and the field's file name; the refusal under a root)
CASES = {
    "fifo": (lambda root, out, name: "files/fifo", "NOT_REGULAR_FILE"),
    "dev_zero": (lambda root, out, name: "/dev/zero", OUTSIDE),
    "huge_sparse": (lambda root, out, name: "files/huge", "TOO_LARGE"),
    "link_out_of_the_root": (lambda root, out, name: f"files/link-{name}", "SYMLINK_REFUSED"),
    "through_a_linked_folder": (lambda root, out, name: f"linked/{name}", "SYMLINK_REFUSED"),
    "dotdot": (lambda root, out, name: f"../{out.name}/{name}", OUTSIDE),
    "dotdot_after_a_folder": (lambda root, out, name: f"files/../../{out.name}/{name}", OUTSIDE),
    "absolute_outside": (lambda root, out, name: str(out / name), OUTSIDE),
    "absolute_outside_missing": (lambda root, out, name: str(out / "missing" / name), OUTSIDE),
    "directory": (lambda root, out, name: "files", "NOT_REGULAR_FILE"),
    "proc_environ": (lambda root, out, name: "/proc/self/environ", OUTSIDE),
}
# what the library API (no root: the caller's own paths) must still refuse
UNREADABLE = {"fifo": "not_regular_file", "dev_zero": "not_regular_file", "huge_sparse": "too_large",
              "directory": "not_regular_file"}


@pytest.fixture
def places(jp_root_dir: Path, tmp_path: Path) -> dict[str, Path]:
    """Readable files outside the root, and under it: a FIFO, a 1 TiB sparse file, links out, a folder."""
    outside = tmp_path / OUTSIDE
    outside.mkdir()
    (outside / FILES["model_path"]).write_text(MODEL)
    (outside / FILES["scripted"]).write_text(SCRIPT)
    (outside / FILES["replay"]).write_bytes((SHIPPED / "library-jwt.cassette.jsonl").read_bytes())
    files = jp_root_dir / "files"
    files.mkdir()
    os.mkfifo(files / "fifo")
    with open(files / "huge", "wb") as handle:
        handle.truncate(1 << 40)
    for name in FILES.values():
        os.symlink(outside / name, files / f"link-{name}")
    os.symlink(outside, jp_root_dir / "linked")
    return {"root": jp_root_dir, "outside": outside}


def disk(*roots: Path) -> dict[str, tuple]:
    """Every entry under ``roots`` by what ``lstat`` says (no file is read: one is 1 TiB)."""
    state: dict[str, tuple] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
                state[path] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino, link)
    return state


def body(field: str, path: str) -> dict:
    if field == "model_path":
        return {"kind": "generate", "request": "A FastAPI backend", "provider": "none", "model_path": path}
    return {"kind": "generate", "request": "A FastAPI backend", "model_path": "example:library", "provider": f"{field}:{path}"}


def expected(field: str, case: str) -> str:
    code = CASES[case][1]
    return OUTSIDE_CODE[field] if code == OUTSIDE else code


def path_of(places, field: str, case: str) -> str:
    return CASES[case][0](places["root"], places["outside"], FILES[field])


async def post(jp_fetch, data: dict) -> tuple[int, dict]:
    try:
        response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(data))
    except HTTPClientError as exc:
        return exc.code, json.loads(exc.response.body)
    return response.code, json.loads(response.body)


@pytest.mark.parametrize("field", list(FILES))
@pytest.mark.parametrize("case", list(CASES))
async def test_rest_refuses_each_named_file_by_name_before_a_run(jp_fetch, jp_serverapp, runs_dir, places, field, case):
    before = disk(places["root"], places["outside"])
    status, answer = await post(jp_fetch, body(field, path_of(places, field, case)))
    assert (status, answer["code"]) == (400, expected(field, case)), answer
    assert "\n" not in answer["message"] and "Traceback" not in answer["message"]
    assert (await jp_fetch("besser-agent", "config")).code == 200  # the loop answers right after
    assert list(runs_dir.iterdir()) == []  # no run, nothing written
    assert disk(places["root"], places["outside"]) == before


@pytest.mark.parametrize("field", list(FILES))
async def test_an_outside_path_gets_one_answer_whether_a_file_is_there_or_not(jp_fetch, jp_serverapp, runs_dir, places, field):
    answers = []
    for case in ("absolute_outside", "absolute_outside_missing"):
        path = path_of(places, field, case)
        status, answer = await post(jp_fetch, body(field, path))
        answers.append((status, answer["code"], answer["message"].replace(path, "PATH")))
    assert answers[0] == answers[1]
    assert (places["outside"] / FILES[field]).is_file() and not (places["outside"] / "missing").exists()


async def test_get_config_answers_while_a_fifo_is_named_again_and_again(jp_fetch, jp_serverapp, runs_dir, places):
    async def name_the_fifo() -> list[tuple[int, dict]]:
        return [await post(jp_fetch, body(field, "files/fifo")) for field in FILES for _ in range(3)]

    async def ask_config() -> list[int]:
        return [(await jp_fetch("besser-agent", "config")).code for _ in range(5)]

    async with LoopLag() as lag:
        start = time.time()
        refusals, configs = await asyncio.gather(name_the_fifo(), ask_config())
        end = time.time()
    assert {(status, answer["code"]) for status, answer in refusals} == {(400, "NOT_REGULAR_FILE")}
    assert configs == [200] * 5
    assert lag.worst(start, end) <= BOUND_S and lag.covered(start, end) >= 1
    assert list(runs_dir.iterdir()) == []


@pytest.mark.parametrize("field", ["scripted", "replay"])
async def test_files_under_the_root_and_shipped_cassettes_still_start_runs(jp_fetch, jp_serverapp, runs_dir, places, field):
    name = FILES[field]
    (places["root"] / name).write_bytes((places["outside"] / name).read_bytes())
    manager = jp_serverapp.web_app.settings[STATE_KEY].manager
    specs = [name, str(places["root"] / name)] + (["library-jwt"] if field == "replay" else [])
    for spec in specs:
        status, answer = await post(jp_fetch, body(field, spec))
        assert status == 201, answer
        run = manager.get(answer["run"]["id"])
        while not any(e.type in ("phase", "done") for e in run.events.events):
            await asyncio.sleep(0.02)  # past reading the provider's file
        assert not [e for e in run.events.events if e.type == "error"], run.events.events
        run.cancel()
        await asyncio.wait_for(run.wait(), 120)


@pytest.mark.parametrize("kind", ["scripted", "replay"])
async def test_the_runs_own_read_refuses_a_file_swapped_after_the_request_off_the_loop(jp_fetch, jp_serverapp, runs_dir, places,
                                                                                         kind):
    """The request's check passed (a file is swapped for a FIFO or a link afterwards): the run reads
    through the same fence, in a worker thread (never waiting on the FIFO), and ends ``failed`` by name."""
    from kernel_ext.hosting.requests import parse_request
    from kernel_ext.pipeline.generation import generation_body

    state = jp_serverapp.web_app.settings[STATE_KEY]
    runs = []
    for path, code in (("files/fifo", "NOT_REGULAR_FILE"), (f"files/link-{FILES[kind]}", "SYMLINK_REFUSED")):
        request = parse_request(body(kind, path))
        run = state.manager.start_body(generation_body(request, state.operator), options=request)
        config = await jp_fetch("besser-agent", "config")  # answered while the run reads
        runs.append((run, code, await asyncio.wait_for(run.wait(), 60)))
        assert config.code == 200
    for run, code, done in runs:
        assert done is not None and done.status == "failed"
        assert [e.code for e in run.events.events if e.type == "error"] == [code]


def test_a_base_run_id_must_be_a_run_id():
    from kernel_ext.hosting.options import OperatorSettings, RunRequest
    from kernel_ext.hosting.requests import RequestRefused, hold_named_files

    for bad in ("../outside", "/etc", "a/b", ".."):
        with pytest.raises(RequestRefused) as refused:
            hold_named_files(RunRequest(request="more", model_path="example:library", base_run_id=bad), OperatorSettings())
        assert refused.value.code == "INVALID_REQUEST"


# -- the Python API: the caller's own paths, but never an unreadable one --------------------------


@pytest.mark.parametrize("field", list(FILES))
@pytest.mark.parametrize("case", list(UNREADABLE))
async def test_the_api_refuses_what_it_cannot_read_before_writing_anything(places, tmp_path, field, case):
    from kernel_ext.pipeline.generation import generate

    path = path_of(places, field, case)
    path = path if path.startswith("/") else str(places["root"] / path)
    before = disk(places["root"], places["outside"])
    runs = tmp_path / "api_runs"
    with pytest.raises(ToolFailure) as refused:
        if field == "model_path":
            generate(path, "A FastAPI backend", runs_dir=runs, provider="none")
        else:
            generate("example:library", "A FastAPI backend", runs_dir=runs, provider=f"{field}:{path}")
    assert refused.value.code == UNREADABLE[case], refused.value
    assert "\n" not in refused.value.message
    assert not runs.exists() and disk(places["root"], places["outside"]) == before


# -- a real kernel's magic, against the server ------------------------------------------------------


KERNEL_PROBE = """
import json
from IPython.core.error import UsageError
outcomes = {}
for name, line in CASES.items():
    try:
        get_ipython().run_line_magic("besser", line)
        outcomes[name] = "started"
    except UsageError as exc:
        outcomes[name] = str(exc)
"""


@pytest.mark.parametrize("backend", ["server", "in-process"])
async def test_the_magic_refuses_each_named_file_in_one_line(jp_serverapp, http_server, runs_dir, places, backend):
    """Through the server every case is held to its root; in-process (no server: the person's own
    paths) what cannot be read is still refused before a run."""
    names = CASES if backend == "server" else UNREADABLE
    cases = {f"{field}/{case}": (field, case) for field in ("scripted", "replay") for case in names}
    lines = {key: f"generate example:library 'A FastAPI backend' --provider {field}:{path_of(places, field, case)}"
             for key, (field, case) in cases.items()}
    before = disk(places["root"], places["outside"])
    kernel = await KernelDriver.start(places["root"], kernel_env(with_server=backend == "server"))  # a notebook in the root
    try:
        await kernel.execute("%load_ext kernel_ext")
        values = await kernel.execute(f"CASES = {lines!r}\n{KERNEL_PROBE}", timeout=120, outcomes="json.dumps(outcomes)")
    finally:
        await kernel.stop()
    outcomes = json.loads(ast.literal_eval(values["outcomes"]))  # the text/plain of a str is its repr
    for key, (field, case) in cases.items():
        code = expected(field, case) if backend == "server" else UNREADABLE[case].upper()
        assert outcomes[key].startswith(code + ":") and "\n" not in outcomes[key], (key, outcomes[key])
    assert list(runs_dir.iterdir()) == [] and not (places["root"] / "besser_runs").exists()
    assert disk(places["root"], places["outside"]) == before


# -- base_run_id: a run folder, read through the same fence ------------------------------------------


@pytest.mark.parametrize(("plant", "code"), [("fifo", "not_regular_file"), ("link", "symlink_refused"),
                                            ("huge", "too_large"), ("folder_link", "symlink_refused")])
def test_a_base_runs_record_is_read_through_the_fence(tmp_path, places, plant, code):
    from kernel_ext.pipeline.modify import find_base_run

    runs = tmp_path / "runs"
    run = runs / "20250101-000000-abcdef"
    runs.mkdir()
    if plant == "folder_link":
        os.symlink(places["outside"], run)
    else:
        run.mkdir()
        if plant == "fifo":
            os.mkfifo(run / "run.json")
        elif plant == "link":
            os.symlink(places["outside"] / FILES["scripted"], run / "run.json")
        else:
            with open(run / "run.json", "wb") as handle:
                handle.truncate(1 << 40)
    before = disk(runs, places["outside"])
    with pytest.raises(ToolFailure) as refused:
        find_base_run(runs, run.name)
    assert refused.value.code == code
    assert disk(runs, places["outside"]) == before
