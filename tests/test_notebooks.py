"""The teaching notebooks, executed top to bottom by nbclient in a real kernel, in-process mode.

No server variables reach the kernel (so the magics host runs in the kernel itself), the
approval cards are answered by the labelled scripted host approver
(``BESSER_NOTEBOOK_APPROVER=scripted``), and two canary secrets sit in the kernel's
environment: an OpenAI-shaped key and a secret-named token. Every output, the stored widget
state and the runs' event logs must be free of errors, tracebacks and secret-looking strings;
a few content checks prove each lesson showed what it teaches. Each notebook runs on
ipykernel 7 and on ipykernel 6 (``kernel_flavours``; a first cell, added here and not in the
committed file, proves which kernel ran it).
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

import nbformat
import pytest
from kernel_flavours import FLAVOURS, flavour_env, version_check
from nbclient import NotebookClient

from kernel_ext.secrets import redact_text
from widgets.lesson import approver_mode

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SERVER_VARIABLES = ("BESSER_AGENT_URL", "BESSER_AGENT_TOKEN", "JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN")
SLOW = {"01-library-prototyping", "05-evaluating-the-agent"}  # whole generation runs with Phase 3 (05: three, verified)


def notebook_names() -> list:
    names = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    return [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [], id=n) for n in names]


def output_texts(notebook) -> list[str]:
    """Every piece of text a reader (or a static viewer) can see in the outputs."""
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                texts.append(output.get("text", ""))
            elif output.get("output_type") == "error":
                texts.append("\n".join([output.get("ename", ""), output.get("evalue", ""), *output.get("traceback", [])]))
            for value in (output.get("data") or {}).values():
                texts.append(value if isinstance(value, str) else json.dumps(value))
    return texts


def cell_text(notebook, startswith: str) -> str:
    """The text outputs of the first code cell whose source starts with ``startswith``."""
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.source.startswith(startswith):
            return "".join(output_texts(nbformat.v4.new_notebook(cells=[cell])))
    raise AssertionError(f"no code cell starts with {startswith!r}")


@pytest.fixture
def canaries(monkeypatch) -> dict[str, str]:
    values = {
        "OPENAI_API_KEY": "sk-canary" + secrets.token_hex(16),
        "BESSER_TEST_CANARY_TOKEN": "canary-" + secrets.token_urlsafe(24),
    }
    for name in SERVER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("BESSER_NOTEBOOK_APPROVER", "scripted")
    return values


async def execute(name: str, workdir: Path, flavour: str = "ipykernel7"):
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(version_check(flavour)))
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=600,
        store_widget_state=True,
        allow_errors=True,  # keep going, so the assertions below can name every failing cell
        resources={"metadata": {"path": str(workdir)}},
    )
    await client.async_execute(env=flavour_env(flavour))
    return notebook


# -- the committed files ----------------------------------------------------------------


@pytest.mark.parametrize("name", [p.values[0] for p in notebook_names()])
def test_committed_without_outputs(name):
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)
    assert "widgets" not in notebook.metadata


def test_the_lessons_are_there_and_none_is_faked():
    present = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    assert {"01-library-prototyping", "02-controlling-side-effects", "03-tool-runtime-gaps"} <= present
    if "04-shell-tools-tour" in present:  # a tour of the shell tools only once they exist
        assert (Path(__file__).resolve().parent.parent / "kernel_ext" / "tools" / "shell.py").exists()


def test_approver_mode_is_person_unless_scripted():
    assert approver_mode({}) == "person"
    assert approver_mode({"BESSER_NOTEBOOK_APPROVER": " Scripted "}) == "scripted"
    assert approver_mode({"BESSER_NOTEBOOK_APPROVER": "approve-everything"}) == "person"


# -- executed -----------------------------------------------------------------------------


@pytest.mark.timeout(900)  # a notebook's own bound is 600 s
@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("name", notebook_names())
async def test_notebook_runs_clean_offline(name, flavour, tmp_path, canaries):
    if name in ("04-shell-tools-tour", "05-evaluating-the-agent"):
        from kernel_ext.sandbox.tiers import choose_tier

        if not choose_tier("auto").available:
            pytest.skip(f"{name} needs a sandbox tier (the app hosts), and none can start on this machine")
    notebook = await execute(name, tmp_path, flavour)

    errors = [
        (index, output.get("ename"), output.get("evalue"))
        for index, cell in enumerate(notebook.cells)
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors, errors
    stderr = [o.get("text") for c in notebook.cells for o in c.get("outputs", []) if o.get("name") == "stderr"]
    assert not stderr, stderr

    visible = "\n".join(output_texts(notebook))
    stored = json.dumps(notebook.metadata.get("widgets", {}))
    logs = "\n".join(p.read_text() for p in tmp_path.glob("besser_runs/*/events.jsonl"))
    for where, text in (("outputs", visible), ("widget state", stored), ("event logs", logs)):
        assert "Traceback" not in text, f"traceback text in the {where}"
        for variable, value in canaries.items():
            assert value not in text, f"{variable} leaked into the {where}"
        assert redact_text(text) == text, f"a secret-looking string in the {where}: {_first_difference(text)}"

    CHECKS.get(name, lambda *_: None)(notebook, tmp_path)


@pytest.mark.slow
async def test_notebook_01_on_the_landlock_fallback(tmp_path, canaries, monkeypatch):
    """A Binder or hub pod without user namespaces: the lesson completes on the fallback tier."""
    from kernel_ext.sandbox import landlock

    if landlock.abi_version() < 1:
        pytest.skip("this kernel has no Landlock, so the fallback tier cannot be shown here")
    monkeypatch.setenv("BESSER_SANDBOX", "landlock")
    notebook = await execute("01-library-prototyping", tmp_path)
    answered = cell_text(notebook, "view = %besser generate")
    assert "sandbox: landlock" in answered and "done: completed" in answered
    assert "5/5 requests passed" in cell_text(notebook, "%%test_api")


def _first_difference(text: str) -> str:
    redacted = redact_text(text)
    for index, (a, b) in enumerate(zip(text, redacted)):
        if a != b:
            return repr(text[max(index - 40, 0) : index + 40])
    return "(length differs)"


# -- what each lesson must have shown ------------------------------------------------------


def check_library(notebook, workdir: Path) -> None:
    first, second = (cell_text(notebook, "%besser show library"), cell_text(notebook, "Member = Class("))
    assert "class Member" not in first and "class Member extends Person" in second  # the picture followed the model
    assert "Borrows: Book [0..*] loans -- borrower [0..1] Member" in second
    answered = cell_text(notebook, "view = %besser generate")
    assert "scripted host approver: approve test_api" in answered  # the card was there and was answered
    assert "done: completed" in answered and "[executed] test_api" in answered
    report = cell_text(notebook, "%%test_api")
    assert "5/5 requests passed" in report and "Authorization: [redacted]" in report
    files = cell_text(notebook, "from pathlib import Path")
    assert re.search(r"backend/auth\.py\s+LLM", files) and re.search(r"backend/routers/book\.py\s+generator", files)
    assert "from deps import SECRET_KEY, encode_token" in cell_text(notebook, "# The repaired import")
    (run_dir,) = list((workdir / "besser_runs").iterdir())
    done = json.loads((run_dir / "events.jsonl").read_text().splitlines()[-1])
    assert done["type"] == "done" and done["status"] == "completed" and not done["blockers"]
    generate = next(c for c in notebook.cells if c.source.startswith("view = %besser generate"))
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in generate.outputs)  # the run ended: static
    assert "done: completed" in generate.outputs[0]["data"]["text/plain"]  # the view's own output, updated in place
    last = notebook.cells[-1]  # the lesson ends by handing the run in
    assert last.cell_type == "code" and last.source.startswith("%besser export")
    exported = nbformat.read(workdir / f"{run_dir.name}.ipynb", as_version=4)
    assert f"exported to {workdir / run_dir.name}.ipynb" in cell_text(notebook, "%besser export")
    assert exported.metadata["besser_export"]["run_id"] == run_dir.name and exported.cells[-1].cell_type == "code"


def check_side_effects(notebook, workdir: Path) -> None:
    default = cell_text(notebook, "default = %besser scenario")
    assert "call-2 edit -> ok · card: executed" in default and "run: completed" in default
    policy = cell_text(notebook, "read_only = %besser scenario")
    assert policy.count("policy_denied · no card") == 2 and "the bug is still on disk: True" in policy
    denied = cell_text(notebook, "denied = %besser scenario")
    assert "scripted host approver: deny edit" in denied and "approval_denied · card: denied" in denied
    assert "tests_failed" in denied and "run: blocked" in denied
    stale = cell_text(notebook, "await answer_cards(stale")
    assert "stale_input · card: stale input" in stale
    assert "your change was kept: True | the fix was not applied over it: True" in stale
    assert "approver asked: 0 time(s)" in cell_text(notebook, "root = fresh_calculator()\napprover")
    assert "add() now says: return a + b" in cell_text(notebook, "root = fresh_calculator()\narguments")
    races = cell_text(notebook, "async def attempt")
    assert "link: error [stale_input]" in races and "same-bytes: error [stale_input]" in races
    assert len(list((workdir / "besser_runs").iterdir())) == 4


def check_runtime_gaps(notebook, workdir: Path) -> None:
    setup = cell_text(notebook, "import dataclasses")
    tier = re.search(r"sandbox tier on this machine: (\S+)", setup).group(1)
    first = cell_text(notebook, "allowed = await call")
    failures = cell_text(notebook, "failed = await call")
    if tier == "unavailable":  # fail closed: every command refused, none ran
        assert first.count("no (sandbox_unavailable)") == 2 and "no (sandbox_unavailable)" in failures
    else:
        assert "-> yes" in first and "no (program_not_allowed)" in first
        assert "the second program ran as well" in cell_text(notebook, 'await call("run_command", command="ls; python3')
        assert failures.count("no (execution_failed)") == 2 and "exit codes: [2, 2, 0]" in failures
        assert "warning: --fast is deprecated" in failures
    search = cell_text(notebook, "import shutil")
    assert "README.md:1: Start the tool with --verbose" in search
    fence = cell_text(notebook, 'other = scratch / "other-project"')
    assert re.search(r"fence: project\n  read_file 'README.md'\s+-> yes", fence)
    assert fence.count("no (outside_workspace)") == 4 and re.search(r"'TODO.md'\s+-> yes", fence)
    assert "extra roots []: no (outside_workspace)\nextra roots ['shared']: yes" in cell_text(notebook, 'shared = scratch / "shared"')


def check_shell_tour(notebook, workdir: Path) -> None:
    expectations = cell_text(notebook, "made = await call")
    assert "sh_run -> yes" in expectations and "sh_run -> no (expectation_failed)" in expectations
    assert "Serving HTTP on 127.0.0.1 port" in cell_text(notebook, "server = await call")
    fetched = cell_text(notebook, 'await call("sh_run", command=f"python3')
    assert "Central Library" in fetched and "GET /index.html" in fetched  # the one new log line, by cursor
    assert "sh_kill -> yes" in cell_text(notebook, 'await call("sh_kill"')
    plans = cell_text(notebook, "for command in")
    for category, command in (("read-only", "ls -la"), ("destructive", "rm -rf build"), ("destructive", "rm -rf ~/.cache"),
                              ("network", "pip install requests")):
        assert re.search(rf"^{category}\s+{re.escape(command)}$", plans, flags=re.MULTILINE), (category, command)
    assert "after the cleanup: ['index.html', 'notes.tmp']" in cell_text(notebook, 'await call("sh_checkpoint"')
    assert "after the restore: ['catalogue.csv', 'count.txt', 'index.html']" in cell_text(notebook, 'await call("sh_restore"')


def check_eval(notebook, workdir: Path) -> None:
    claims = cell_text(notebook, "import json")  # the wrong script claims success...
    assert "T1 implemented" in claims and "agent's last words: Done." in claims and "the run ended: completed" in claims
    report = cell_text(notebook, "print(wrong.report.to_text())")  # ...and its verifier, reading none of it, fails it
    assert report.startswith("library-impossible: FAILED (no_fabricated_route") and "got 200" in report
    assert "every run passed its verifier: True" in cell_text(notebook, "from kernel_ext.eval.live import ProviderChoice")
    view = next(c for c in notebook.cells if c.source.startswith("from widgets.eval_view"))
    page = view.outputs[0]["data"]["text/html"]
    assert "<svg" in page and "2/2 100%" in page and "replayed from recordings, not a live model" in page
    assert re.search(r"^library-cors\s+1/1\s+100%\s+\[21%, 100%\]", view.outputs[0]["data"]["text/plain"], re.MULTILINE)
    failing = cell_text(notebook, "from kernel_ext.eval.results import")
    assert re.search(r"^library-impossible\s+0/1\s+0%\s+\[0%, 79%\].*no_fabricated_route", failing, re.MULTILINE)
    assert json.loads((workdir / "eval-results.json").read_text())["overall"]["passes"] == 2


CHECKS = {
    "01-library-prototyping": check_library,
    "02-controlling-side-effects": check_side_effects,
    "03-tool-runtime-gaps": check_runtime_gaps,
    "04-shell-tools-tour": check_shell_tour,
    "05-evaluating-the-agent": check_eval,
}
