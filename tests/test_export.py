# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""Handing in: a finished run exported as a notebook (``hosting/export``) re-runs offline into the same app.

The demo run (the shipped cassette through the replay provider, every category approved) is made
once by the real command line. Its export is executed by nbclient in a real kernel: the model
cell rebuilds the model, the cassette cell writes the run's recorded turns, the re-run cell
generates again with the replay provider into a fresh folder, and that app must hold the same
files with the same bytes as the run's (internal names, ``workspace/internal.py``, left out).
A planted key, known to the exporting process, and a key-shaped string reach no export through
any entry point (Python, command line, magic, REST), and exporting changes nothing but the one
file it writes. Refusals (no run, unfinished, the file exists) are one named line, nothing lost.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from export_fixtures import ROOT, RUN_ID, demo_run, folder_state, run_copy  # noqa: F401
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from jupyter_fixtures import async_client, extension_config, jp_asyncio_loop, jp_server_config, runs_dir  # noqa: F401
from kernel_flavours import flavour_env
from nbclient import NotebookClient
from tornado.httpclient import HTTPClientError

from kernel_ext.hosting.export import ExportRefused, export_run
from kernel_ext.workspace.internal import is_internal_name

ENTRIES = ("python", "cli", "magic", "magic-server", "rest")


def app_tree(app: Path) -> dict[str, bytes]:
    """Every file under ``app`` by relative path, run-internal names left out; links fail the test."""
    files: dict[str, bytes] = {}
    for folder, dirs, names in os.walk(app):
        dirs[:] = [d for d in dirs if not is_internal_name(d)]
        for name in names:
            path = Path(folder) / name
            assert not path.is_symlink(), path
            if not is_internal_name(name):
                files[str(path.relative_to(app))] = path.read_bytes()
    return files


# -- the round trip ------------------------------------------------------------------------


@pytest.mark.slow
async def test_the_exported_demo_reruns_offline_into_the_same_app(run_copy, tmp_path, monkeypatch):
    handin = tmp_path / "handin"
    handin.mkdir()
    path = export_run(run_copy, handin)
    assert path == handin / f"{RUN_ID}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in notebook.cells)
    for heading in ("## The model", "## The request", "## Timeline", "## Decided calls", "## Findings",
                    "## Request reports", "## Who wrote which file", "## Re-run it offline"):
        assert heading in text, heading
    assert "approved by auto" in text and "+from auth import router as auth_router" in text  # a decided call's diff
    assert "jwt-login-flow" in text and "backend/auth.py" in text  # a request report; an LLM-authored file
    assert notebook.metadata["besser_export"]["run_id"] == RUN_ID

    for name in ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN"):
        monkeypatch.delenv(name, raising=False)  # the teacher's kernel, offline: runs in-process
    client = NotebookClient(notebook, kernel_name="python3", timeout=600, allow_errors=True,
                            resources={"metadata": {"path": str(handin)}})
    await client.async_execute(env=flavour_env("ipykernel7"))
    errors = [(i, o.get("ename"), o.get("evalue")) for i, c in enumerate(notebook.cells)
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    assert "the model the run used" in printed and ": completed - " in printed
    assert "the same files, byte for byte, as the run ended with" in printed

    (rerun,) = [p for p in handin.iterdir() if p.name.startswith(f"rerun-{RUN_ID}-")]
    original, regenerated = app_tree(run_copy / "app"), app_tree(rerun / "app")
    assert sorted(regenerated) == sorted(original) and len(original) >= 15
    assert [p for p in original if original[p] != regenerated[p]] == []
    assert (handin / f"{RUN_ID}.turns.cassette.jsonl").is_file()


# -- secrets and containment, through every entry point ------------------------------------


def plant(run_dir: Path, key: str, shaped: str) -> None:
    """``key`` in every file an export reads (as if it had been written before it was known);
    ``shaped`` (key-shaped, known to nobody) in the event log and in what the runnable cells carry
    (the request and the recorded turns)."""
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    done = json.loads(lines[-1])
    text = {"seq": done["seq"], "run_id": done["run_id"], "ts": done["ts"], "type": "text",
            "text": f"the key is {key}; another is {shaped}"}
    done["seq"] += 1
    (run_dir / "events.jsonl").write_text("\n".join([*lines[:-1], json.dumps(text), json.dumps(done)]) + "\n")
    recipe = json.loads((run_dir / "run.json").read_text())
    recipe["request"] += f" {key}"
    (run_dir / "run.json").write_text(json.dumps(recipe))
    request = json.loads((run_dir / ".besser" / "request.json").read_text())
    request["request"] += f" {key} {shaped}"
    (run_dir / ".besser" / "request.json").write_text(json.dumps(request))
    turns = (run_dir / ".besser" / "turns.cassette.jsonl").read_text().splitlines()
    exchange = json.loads(turns[1])
    exchange["append"][0]["text"] += f" {key} {shaped}"
    turns[1] = json.dumps(exchange)
    (run_dir / ".besser" / "turns.cassette.jsonl").write_text("\n".join(turns) + "\n")
    with (run_dir / ".besser" / "model.py").open("a") as handle:
        handle.write(f"# {key}\n")


async def export_through(entry: str, run_dir: Path, out: Path, *, force: bool = False, fetch=None) -> str:
    """Export ``run_dir`` to ``out`` through ``entry``; the text written (raises on a refusal)."""
    flag = " --force" if force else ""
    if entry == "python":
        export_run(run_dir, out, force=force)
    elif entry == "cli":
        done = subprocess.run([sys.executable, "-m", "kernel_ext", "export", run_dir.name, "--runs-dir", str(run_dir.parent),
                               "--to", str(out), *flag.split()],
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
        if done.returncode:
            raise ExportRefused(*done.stderr.strip().removeprefix("error: ").split(": ", 1))
        assert done.stderr == "" and str(out) in done.stdout
    elif entry.startswith("magic"):  # in-process, or the server's (which the magic finds through the variables it exported)
        shell = InteractiveShell.instance()
        shell.run_line_magic("reload_ext", "kernel_ext")  # a fresh backend: this test's environment
        line = f"export {run_dir.name} --to {out}{flag}"
        if entry == "magic-server":  # the server answers on this loop: the magic's blocking call waits in a thread
            assert os.environ.get("BESSER_AGENT_URL")
            here = Path.cwd()
            os.chdir(out.parent)  # no besser_runs here: only the server can find the run
            try:
                notice = await asyncio.to_thread(shell.run_line_magic, "besser", line)
            finally:
                os.chdir(here)
            assert "in-process" not in str(notice)
        else:
            shell.run_line_magic("besser", line)
    else:
        response = await fetch("besser-agent", "runs", run_dir.name, "export")
        assert response.headers["Content-Type"] == "application/x-ipynb+json"
        out.write_bytes(response.body)
    return out.read_text()


@pytest.fixture
def planted(run_copy, monkeypatch) -> tuple[str, str]:
    key, shaped = "plant" + secrets.token_hex(20), "sk-" + secrets.token_hex(20)  # the key has no key shape
    monkeypatch.setenv("OPENAI_API_KEY", key)  # known to whoever exports (and to the server it starts)
    for name in ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    plant(run_copy, key, shaped)
    return key, shaped


@pytest.fixture
def served(request, planted):
    """For the REST entry: a real Jupyter server whose runs folder holds the planted run."""
    if request.param not in ("rest", "magic-server"):
        return request.param, None
    return request.param, request.getfixturevalue("jp_fetch")  # started now: the planted key is in its environment


@pytest.fixture
def runs_dir(tmp_path) -> Path:  # the server hosts the folder the planted run was copied into
    return tmp_path / "besser_runs"


@pytest.mark.parametrize("served", ENTRIES, indirect=True)
async def test_no_secret_reaches_an_export_and_nothing_else_changes(served, planted, run_copy, tmp_path, monkeypatch):
    entry, fetch = served
    key, shaped = planted
    monkeypatch.chdir(tmp_path)
    handin = tmp_path / "handin"
    handin.mkdir()
    before = folder_state(tmp_path / "besser_runs")
    text = await export_through(entry, run_copy, handin / "work.ipynb", fetch=fetch)
    windows = {key[i:i + 12] for i in range(len(key) - 11)}
    assert key not in text and not [w for w in windows if w in text], "the known key (or 12+ characters of it) leaked"
    assert shaped not in text and "[redacted]" in text
    nbformat.validate(nbformat.reads(text, as_version=4))
    assert folder_state(tmp_path / "besser_runs") == before  # the run is read, never written
    assert sorted(p.name for p in handin.iterdir()) == ["work.ipynb"]  # no temporary file left behind


# -- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ("python", "cli", "magic"))
async def test_refusals_are_one_named_line_and_lose_nothing(entry, run_copy, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    refusal = (ExportRefused, UsageError)
    kept = tmp_path / "kept.ipynb"
    kept.write_text("a teacher's own notebook")
    with pytest.raises(refusal, match="EXPORT_EXISTS") as exists:
        await export_through(entry, run_copy, kept)
    assert kept.read_text() == "a teacher's own notebook" and "\n" not in str(exists.value)
    replaced = json.loads(await export_through(entry, run_copy, kept, force=True))
    assert replaced["metadata"]["besser_export"]["run_id"] == RUN_ID
    missing = run_copy.parent / "no-such-run"
    with pytest.raises(refusal, match="RUN_NOT_FOUND") as unknown:
        await export_through(entry, missing, tmp_path / "a.ipynb")
    assert "\n" not in str(unknown.value)
    lines = (run_copy / "events.jsonl").read_text().splitlines()
    (run_copy / "events.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # a run still going: no done yet
    before = folder_state(run_copy)
    with pytest.raises(refusal, match="RUN_NOT_FINISHED") as unfinished:
        await export_through(entry, run_copy, tmp_path / "b.ipynb")
    assert "\n" not in str(unfinished.value) and folder_state(run_copy) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["besser_runs", "kept.ipynb"]


async def test_the_rest_route_names_an_unknown_run(runs_dir, jp_fetch):
    runs_dir.mkdir()
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("besser-agent", "runs", "no-such-run", "export")
    assert refused.value.code == 404 and json.loads(refused.value.response.body)["code"] == "RUN_NOT_FOUND"


# -- the recording every run keeps ---------------------------------------------------------


@pytest.mark.timeout(600)  # the demo run's own bound is 300 s
def test_the_run_keeps_its_request_model_code_and_turns(demo_run):
    """What an export replays is kept by the run itself, cut of keys, beside its state."""
    from kernel_ext.model.loading import load_model
    from kernel_ext.model.pycode import check_rebuilds
    from kernel_ext.providers.replay import read_cassette

    kept = demo_run / ".besser"
    assert json.loads((kept / "request.json").read_text())["approve"] == "all"
    check_rebuilds((kept / "model.py").read_text(), load_model("example:library"))
    cassette = read_cassette(kept / "turns.cassette.jsonl")
    assert len(cassette.exchanges) == 10 and cassette.header["recorded_from"]["kind"] == "replay"


def test_a_lone_surrogate_is_recorded_as_its_escape_and_replays_the_same(tmp_path):
    from kernel_ext.providers.events import Stop, TextDelta
    from kernel_ext.providers.messages import Conversation, Request
    from kernel_ext.providers.recording import CassetteWriter
    from kernel_ext.providers.replay import event_from_dict, read_cassette

    writer = CassetteWriter(tmp_path / "c.jsonl", {"kind": "live"}, best_effort=True)
    conversation = Conversation(system="s")
    conversation.user("hello \u00e9")
    request = Request.of(conversation)
    writer.write(request, [TextDelta("lone \ud800 surrogate"), Stop("end_turn")], None)
    assert not writer.failed and b'"lone \\ud800 surrogate"' in (tmp_path / "c.jsonl").read_bytes()  # its JSON escape
    (exchange,) = read_cassette(tmp_path / "c.jsonl").exchanges
    assert event_from_dict(exchange["events"][0]) == TextDelta("lone \ud800 surrogate")


def test_a_best_effort_recording_that_cannot_write_is_removed_not_raised(tmp_path):
    from kernel_ext.providers.events import Stop
    from kernel_ext.providers.messages import Conversation, Request
    from kernel_ext.providers.recording import CassetteWriter

    folder = tmp_path / "run"
    folder.mkdir()
    writer = CassetteWriter(folder / "c.jsonl", {"kind": "live"}, best_effort=True)
    conversation = Conversation(system="s")
    conversation.user("hi")
    request = Request.of(conversation)
    writer.write(request, [Stop("end_turn")], None)
    (folder / "c.jsonl").unlink()
    folder.rmdir()  # the run's folder went away mid-run
    writer.write(request, [Stop("end_turn")], None)
    assert writer.failed and not (folder / "c.jsonl").exists()
    strict = CassetteWriter(tmp_path / "strict.jsonl", {"kind": "live"})
    (tmp_path / "strict.jsonl").unlink()
    tmp_path.joinpath("strict.jsonl").mkdir()  # a folder where the file was: appending fails
    with pytest.raises(OSError):
        strict.write(request, [Stop("end_turn")], None)


@pytest.mark.parametrize("planted", [
    "from os import system as Class\n{text}",  # a foreign import: the loader ignores it, Python runs it
    "{text}\n_: __import__('os').system('touch PWNED')\n",  # an annotation: never evaluated by the loader
    "{text}\ndomain_model.name: __import__('os').system('touch PWNED')\n",
    "{text}\n0 if 0 else __import__('os').system('touch PWNED')\n",
], ids=["foreign-import", "annotation", "attribute-annotation", "expression"])
def test_a_model_script_that_is_not_only_besser_is_never_handed_out(planted, run_copy, tmp_path):
    """The run's kept script with anything the builder did not write (what the safe loader ignores, a
    notebook would run) is replaced by one written from the recipe's JSON form, which rebuilds the same
    model; the run folder is left as it was."""
    kept = run_copy / ".besser" / "model.py"
    kept.write_text(planted.format(text=kept.read_text()))
    before = kept.read_bytes()
    notebook = nbformat.read(export_run(run_copy, tmp_path), as_version=4)
    (code,) = [c.source for c in notebook.cells if c.cell_type == "code" and "domain_model = DomainModel(" in c.source]
    every = "\n".join(c.source for c in notebook.cells)
    assert "import system" not in code and "from os" not in every and "__import__" not in every
    assert kept.read_bytes() == before
    assert "sorted by name" in "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")


def test_what_a_reader_sees_cannot_be_reordered(run_copy, tmp_path):
    """A bidi override from the model (a method body, a reply) is shown as its escape, never raw."""
    kept = run_copy / ".besser" / "model.py"
    kept.write_text(kept.read_text().replace("return self.name.title()", "return self.name.title()  # \u202eevil"))
    lines = (run_copy / "events.jsonl").read_text().splitlines()
    done = json.loads(lines[-1])
    text = {"seq": done["seq"], "run_id": done["run_id"], "ts": done["ts"], "type": "text", "text": "see \u202eevil\u2066"}
    done["seq"] += 1
    (run_copy / "events.jsonl").write_text("\n".join([*lines[:-1], json.dumps(text), json.dumps(done)]) + "\n")
    written = export_run(run_copy, tmp_path).read_text()
    notebook = json.loads(written)
    sources = "".join("".join(c["source"]) for c in notebook["cells"])
    assert "\u202e" not in sources and "\u2066" not in sources and "\\u202eevil" in sources
