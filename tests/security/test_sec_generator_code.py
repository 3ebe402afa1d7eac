# ruff: noqa: F811 - the attack fixture imported from test_sec_model_code is requested by name
"""A generator that runs model-derived code runs it in the sandbox: BESSER's SQL generator.

BESSER's ``SQLGenerator`` writes ``sql_alchemy.py`` with the model's method bodies pasted in and
runs it (``subprocess``) to dump the DDL. Our ``sql`` target is ``confined``
(``generation/confined.py``): the whole generator runs in a one-off sandbox, so the same hostile
method body as ``test_sec_model_code.py`` (it writes outside, connects to a loopback listener,
reads a host secret file, ``/proc/<pid>/environ`` of every process it sees and its own
environment for ``OPENAI_API_KEY``, then raises with what it got) is contained on every entry
point that reaches the generator with the body kept:

- ``generate MODEL --generator sql --approve edits`` (Phase 1 only, bodies kept by the flag);
- ``generate MODEL "SQL DDL tables only" --provider none --approve edits`` (the pipeline selects ``sql``);
- REST ``POST runs`` with ``target: sql``, ``approve: all`` on a real ``jupyter server``;
- ``tool --model MODEL --allow generate --approve yes generate_sql`` (bodies kept, generator confined);
- the Python API ``run_phase1(MODEL, OUT, "sql")`` and a ``generate_sql`` call through the real
  Executor with a denying host (prepare builds the preview in the sandbox; the card is never
  reached because the preview failed, and nothing ran on the host).

``tool --model ... --approve no generate_sql`` stubs the bodies (no card on this command): the
payload never runs and the answer is ``approval_denied``. Each entry point is a real host
process started with a fake key in its environment. Asserted every time: the listener got
nothing, the planted folder is unchanged, nothing landed in ``/tmp`` or the run folder, neither
secret appears in any output or file. Links a payload leaves for the host (the output folder
swapped for a link, a link or FIFO inside it) are never followed or read by the host. A benign
model still gets its ``tables_sqlite.sql``, byte
for byte what BESSER gives in-process; with no sandbox tier the generator is refused
(``sandbox_unavailable``) and nothing ran; under ``off`` it runs and says ``sandbox_off``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
from sandbox_fixtures import tier_param

from .test_sec_model_code import (  # noqa: F401
    MARKER,
    ROOT,
    Attack,
    _run,
    assert_contained,
    attack,
    via_rest,
)

SQL = "sql/tables_sqlite.sql"


def via_cli_phase1(attack: Attack, env: dict[str, str]) -> str:
    return _run([sys.executable, "-m", "kernel_ext", "generate", str(attack.model_file("json")), "--out", str(attack.run_dir),
                 "--generator", "sql", "--approve", "edits", "--json"], env)


def via_cli_pipeline(attack: Attack, env: dict[str, str]) -> str:
    return _run([sys.executable, "-m", "kernel_ext", "generate", str(attack.model_file("json")), "SQL DDL tables only",
                 "--out", str(attack.run_dir), "--provider", "none", "--approve", "edits"], env)


def via_rest_sql(attack: Attack, env: dict[str, str]) -> str:
    return via_rest(attack, "json", env, request="SQL DDL tables", target="sql", approve="all")


def _tool(attack: Attack, env: dict[str, str], answer: str, model: str | None = None) -> str:
    attack.run_dir.mkdir(exist_ok=True)
    return _run([sys.executable, "-m", "kernel_ext", "tool", "--workspace", str(attack.run_dir), "--model",
                 model or str(attack.model_file("python")), "--allow", "generate", "--approve", answer, "generate_sql", "{}"], env)


def via_tool_yes(attack: Attack, env: dict[str, str]) -> str:
    return _tool(attack, env, "yes")


API_PHASE1 = """
import json, sys
from kernel_ext.generation import run_phase1
from kernel_ext.errors import ToolFailure
try:
    print(json.dumps(run_phase1(sys.argv[1], sys.argv[2], "sql").to_dict()))
except ToolFailure as exc:
    print(exc.code, exc.message)
"""

# The person's own in-memory model (bodies kept) on a ToolContext, a host that denies every card.
API_TOOL_DENIED = """
import sys
from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall, always_deny
from kernel_ext.model.loading import load
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace

context = ToolContext(services={"workspace": Workspace(sys.argv[2]), "domain_model": load(sys.argv[1]).model})
executor = Executor(default_catalog(), context, policy=ExecutionPolicy.allowing(["generate"]), approver=always_deny)
print(executor.execute_sync(ToolCall("api-1", "generate_sql", "{}")).to_json())
"""


# Phase 2 of a pipeline whose target bundles no SQL: the (scripted, labelled) LLM calls generate_sql.
API_PHASE2 = """
import asyncio, sys
from kernel_ext.pipeline.generation import generate
from kernel_ext.providers.scripted import Script, ScriptedProvider, Turn, call

turns = [Turn("", (call("submit_tasks", {"tasks": ["add the SQL DDL of the domain"]}),)),
         Turn("", (call("generate_sql", {}),)), *[Turn("Done.")] * 8]

async def main():
    run = generate(sys.argv[1], "Python classes and their SQL tables", run_dir=sys.argv[2], target="python_classes",
                   provider=ScriptedProvider(Script.of("generate-sql-in-phase-2", turns)), approve="all")
    await asyncio.wait_for(run.wait(), 500)
    for event in run.events.events:
        if event.type == "tool_result":
            print(event)

asyncio.run(main())
"""


def via_api_phase2(attack: Attack, env: dict[str, str]) -> str:
    return _run([sys.executable, "-c", API_PHASE2, str(attack.model_file("json")), str(attack.run_dir)], env)


def via_api_phase1(attack: Attack, env: dict[str, str]) -> str:
    return _run([sys.executable, "-c", API_PHASE1, str(attack.model_file("json")), str(attack.run_dir)], env)


def via_api_tool_denied(attack: Attack, env: dict[str, str]) -> str:
    attack.run_dir.mkdir(exist_ok=True)
    return _run([sys.executable, "-c", API_TOOL_DENIED, str(attack.model_file("json")), str(attack.run_dir)], env)


ENTRY_POINTS = {"cli_phase1": via_cli_phase1, "cli_pipeline": via_cli_pipeline, "rest": via_rest_sql,
                "tool_yes": via_tool_yes, "api_phase1": via_api_phase1, "api_phase2": via_api_phase2,
                "api_tool_denied": via_api_tool_denied}
CASES = [(entry, "bwrap") for entry in ENTRY_POINTS] + [("cli_phase1", "landlock"), ("tool_yes", "landlock")]


@pytest.mark.slow
@pytest.mark.parametrize("entry,tier", [pytest.param(e, *tier_param(t).values, marks=tier_param(t).marks, id=f"{e}-{t}")
                                        for e, t in CASES])
def test_a_hostile_method_body_in_the_sql_generator_is_contained(attack, entry, tier):
    output = ENTRY_POINTS[entry](attack, attack.env(tier))
    assert_contained(attack, output, ran=True)  # the payload ran (its marker is in the answer), in the sandbox
    assert "generation_failed" in output or "SQL DDL generator failed" in output, output[-3000:]
    assert not (attack.run_dir / "sql" / "tables_sqlite.sql").exists()


@pytest.mark.slow
def test_the_tool_command_without_yes_stubs_the_bodies_and_runs_nothing(attack):
    """No card on ``tool``: ``--approve no`` keeps no foreign body (a note says so); the answer is the denial."""
    output = _tool(attack, attack.env("bwrap"), "no")
    assert_contained(attack, output, ran=False)
    assert "model_method_bodies_removed" in output and "--approve yes" in output
    result = json.loads(output[output.index("{"):output.rindex("}") + 1])
    assert result["ok"] is False and result["error"]["code"] == "approval_denied", result
    assert sorted(p.name for p in attack.run_dir.iterdir()) == []


def _sql_in_process() -> bytes:
    """BESSER's own SQL generator on the shipped example, in this (test) process: the reference bytes."""
    from besser.generators.sql import SQLGenerator

    from kernel_ext.model.examples import build_library_model

    with tempfile.TemporaryDirectory() as out:
        SQLGenerator(model=build_library_model(), output_dir=out, sql_dialect="sqlite").generate()
        return (Path(out) / "tables_sqlite.sql").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["cli_phase1", "tool_yes", "api_phase1"])
def test_a_benign_model_still_gets_its_tables_byte_for_byte(tmp_path, entry):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BESSER_", "OPENAI_"))}
    env.update({"PYTHONPATH": str(ROOT), "BESSER_SANDBOX": "bwrap"})
    out = tmp_path / "run"
    out.mkdir()
    if entry == "cli_phase1":
        output = _run([sys.executable, "-m", "kernel_ext", "generate", "example:library", "--out", str(out), "--generator", "sql",
                       "--json"], env)
    elif entry == "tool_yes":
        output = _run([sys.executable, "-m", "kernel_ext", "tool", "--workspace", str(out), "--model", "example:library",
                       "--allow", "generate", "--approve", "yes", "generate_sql", "{}"], env)
    else:
        output = _run([sys.executable, "-c", API_PHASE1, "example:library", str(out)], env)
    assert (out / SQL).is_file(), output[-3000:]
    assert (out / SQL).read_bytes() == _sql_in_process()
    assert "CREATE TABLE" in (out / SQL).read_text()


def test_without_a_sandbox_the_sql_generator_is_refused_and_nothing_ran(attack):
    env = attack.env("bwrap", PATH=str(Path(sys.executable).parent))  # no bwrap on PATH: the tier cannot start
    output = via_cli_phase1(attack, env)
    assert_contained(attack, output, ran=False)
    assert "sandbox_unavailable" in output and "nothing ran" in output, output[-3000:]
    assert not attack.run_dir.exists() or not any(attack.run_dir.rglob("*"))


def test_the_operators_off_tier_runs_the_sql_generator_and_says_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BESSER_")}
    env.update({"PYTHONPATH": str(ROOT), "BESSER_SANDBOX": "off"})
    output = _run([sys.executable, "-m", "kernel_ext", "generate", "example:library", "--out", str(tmp_path / "run"),
                   "--generator", "sql", "--json"], env)
    result = json.loads(output[output.index("{"):output.rindex("}") + 1])
    assert (tmp_path / "run" / SQL).is_file(), output[-3000:]
    # (the finding's code is ``sandbox_off``; the event shape of a finding carries source and message)
    assert any(f["source"] == "phase1.generator" and f["severity"] == "warning" and "ran unconfined" in f["message"]
               for f in result["findings"]), result["findings"]


# Run inside the generator's sandbox (by the DDL script BESSER starts): find the worker's output
# folder (the last argument of its command line) and leave links for the host to follow.
LINK_PAYLOAD = r'''
import os, shutil
args = [a for a in open("/proc/%d/cmdline" % os.getppid(), "rb").read().split(b"\0") if a]
out = args[-1].decode()
if MODE == "folder":
    decoy = os.path.join(os.path.dirname(out), "decoy")
    os.mkdir(decoy)
    with open(os.path.join(decoy, "stolen.txt"), "w") as handle:
        handle.write("decoy")
    shutil.rmtree(out)
    os.symlink(decoy, out)
else:
    os.symlink(SECRET_FILE, os.path.join(out, "secret.sql"))
    os.mkfifo(os.path.join(out, "stall.sql"))
'''


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["folder", "entry"])
def test_links_a_confined_generator_leaves_are_never_followed_by_the_host(attack, mode):
    """The host reads the sandbox's output through descriptors: a linked output folder is refused by
    name, a link or FIFO inside it is skipped; the host secret it points at is read by nobody."""
    from kernel_ext.errors import ToolFailure
    from kernel_ext.generation import run_phase1
    from kernel_ext.model import build_library_model

    source = LINK_PAYLOAD.replace("MODE", repr(mode)).replace("SECRET_FILE", repr(str(attack.outside / "secret.txt")))
    model = build_library_model()
    book = next(t for t in model.types if getattr(t, "name", "") == "Book")
    next(m for m in book.methods if m.name == "is_long").code = (
        f"def is_long(self, threshold=exec({source!r}, {{}}) or 10):\n    return self.pages > threshold\n")
    if mode == "folder":
        with pytest.raises(ToolFailure) as failure:
            run_phase1(model, attack.run_dir, "sql", sandbox_policy="bwrap")
        assert failure.value.code == "generation_failed" and "no plain output folder" in failure.value.message
        assert not any(attack.run_dir.rglob("*"))
    else:
        result = run_phase1(model, attack.run_dir, "sql", sandbox_policy="bwrap")
        assert [f.path for f in result.files] == [SQL]
    assert_contained(attack, "", ran=False)


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["api_phase1", "api_tool_denied"])
def test_the_operators_off_for_method_bodies_holds_on_the_python_api(attack, entry):
    """``BESSER_MODEL_METHOD_BODIES=off``: a model handed straight to ``run_phase1`` or a tool
    context (no card, no flag on the way) is still generated with stubs; the payload never runs."""
    output = ENTRY_POINTS[entry](attack, attack.env("bwrap", BESSER_MODEL_METHOD_BODIES="off"))
    assert_contained(attack, output, ran=False)
    if entry == "api_phase1":
        result = json.loads(output[output.index("{"):output.rindex("}") + 1])
        assert [f["path"] for f in result["files"]] == [SQL]
        assert any("generated as stubs" in f["message"] for f in result["findings"]), result["findings"]
    else:
        result = json.loads(output[output.index("{"):output.rindex("}") + 1])
        assert result["ok"] is False and result["error"]["code"] == "approval_denied", result
