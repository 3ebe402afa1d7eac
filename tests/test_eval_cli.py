"""``besser-agent eval`` in a real subprocess: the shipped cassettes replay offline to a results table,
a recording replays to the same verdicts, and bad input is one line with a named code.

The runs are real (pipeline, sandboxed app hosts, verifiers); what answers is a recording made
from each task's oracle script, or a task's own script, labelled as such: no model runs here.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from api_fixtures import requires_sandbox
from provider_server import PROVIDER_ENV

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "kernel_ext" / "eval" / "data" / "cassettes"
QUICK = "library-impossible"  # the shortest run of the suite (no app change to verify at length)
PAIR = ("library-cors", QUICK)  # two short runs, in the registry's order (the order a suite runs them)


def besser_eval(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
    return subprocess.run([sys.executable, "-m", "kernel_ext", "eval", *args], env={**clean, **(env or {})}, cwd=cwd,
                          capture_output=True, text=True, timeout=900)


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


# -- bad input: one line, nothing run, nothing written ------------------------------------------------


@pytest.mark.parametrize(("provider", "variable"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_a_live_provider_without_a_key_says_how_to_give_one(provider, variable, tmp_path):
    line = one_line(besser_eval("--provider", provider, "--runs", str(tmp_path / "runs"), "--record", str(tmp_path / "tapes")))
    assert line.startswith("error: not_configured: ") and f"export {variable}=" in line
    assert not (tmp_path / "runs").exists() and not (tmp_path / "tapes").exists()


def test_no_provider_at_all_names_the_choices(tmp_path):
    line = one_line(besser_eval("--runs", str(tmp_path / "runs")))
    assert "OPENAI_API_KEY" in line and "--provider replay:DIR" in line and "11434" in line
    assert not (tmp_path / "runs").exists()


def test_an_unknown_task_is_named(tmp_path):
    line = one_line(besser_eval("--provider", "scripted:oracle", "--tasks", f"{QUICK},no-such-task", "--runs", str(tmp_path / "r")))
    assert line.startswith("error: not_found: no evaluation task 'no-such-task'; known: library-jwt")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("args", "said"), [
    (("--provider", "scripted:maybe"), "error: invalid_argument: --provider 'scripted:maybe' is not one of"),
    (("--provider", "replay:/nowhere/at/all"), "error: not_found: replay: /nowhere/at/all is neither"),
    (("--provider", f"replay:{SHIPPED}", "--repeat", "2"), "error: invalid_argument: --repeat does not apply to a replay"),
    (("--provider", "scripted:oracle", "--repeat", "0"), "error: invalid_argument: --repeat 0 is not within 1..100"),
])
def test_bad_usage_is_one_line(args, said, tmp_path):
    assert one_line(besser_eval(*args, "--runs", str(tmp_path / "r"))).startswith(said)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("tasks", ["", ",", " , "])
def test_tasks_naming_no_task_is_refused_not_read_as_every_task(tasks, tmp_path):
    line = one_line(besser_eval("--provider", "scripted:oracle", "--tasks", tasks, "--runs", str(tmp_path / "r")))
    assert line == f"error: invalid_argument: --tasks {tasks!r} names no task (comma-separated ids; --list shows them)"
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("flag", "where", "said"), [
    ("--runs", "a-file", "{tmp}/a-file: {tmp}/a-file is a file, not a folder"),
    ("--record", "a-file/tapes", "{tmp}/a-file/tapes: {tmp}/a-file is a file, not a folder"),
    ("--json", "a-file/results.json", "{tmp}/a-file/results.json: {tmp}/a-file is a file, not a folder"),
    ("--json", "", "{tmp}: is a folder; give a file name"),
])
def test_a_place_it_cannot_write_is_named_before_any_run(flag, where, said, tmp_path):
    """Checked before the first run: a live suite is never spent for a results place that fails at the end."""
    (tmp_path / "a-file").write_text("kept\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    args = [flag, str(tmp_path / where) if where else str(tmp_path)]
    if flag != "--runs":
        args += ["--runs", str(tmp_path / "r")]
    line = one_line(besser_eval("--provider", "scripted:oracle", "--tasks", QUICK, *args))
    assert line == f"error: invalid_argument: {flag} " + said.format(tmp=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before and (tmp_path / "a-file").read_text() == "kept\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through a folder's permission bits")
def test_a_read_only_runs_folder_is_named_before_any_run(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    line = one_line(besser_eval("--provider", "scripted:oracle", "--tasks", QUICK, "--runs", str(locked / "runs")))
    assert line == f"error: invalid_argument: --runs {locked}/runs: cannot write in {locked} (no write permission)"
    assert list(locked.iterdir()) == []


def test_a_cassette_whose_name_names_no_task_is_refused(tmp_path):
    (tmp_path / "my-run.jsonl").write_text((SHIPPED / f"{QUICK}.r1.jsonl").read_text())
    line = one_line(besser_eval("--provider", f"replay:{tmp_path}", "--runs", str(tmp_path / "r")))
    assert "cassette 'my-run.jsonl' names no evaluation task (expected <task>.r<N>.jsonl)" in line


def test_the_shipped_cassettes_cover_every_task_and_say_they_came_from_scripts():
    from kernel_ext.eval.tasks import TASKS
    from kernel_ext.providers.replay import read_cassette

    assert sorted(p.name for p in SHIPPED.glob("*.jsonl")) == sorted(f"{t}.r1.jsonl" for t in TASKS)
    for path in SHIPPED.glob("*.jsonl"):
        recorded = read_cassette(path).recorded_from
        task = path.name.split(".r1.")[0]
        assert recorded["kind"] == "scripted" and recorded["label"] == f"scripted:{task}-oracle", path.name
        assert recorded["notice"] == "an authored script, not a live model"


# -- real runs ------------------------------------------------------------------------------------------


@pytest.mark.slow
@requires_sandbox
def test_replaying_the_shipped_cassettes_prints_the_table(tmp_path):
    done = besser_eval("--provider", f"replay:{SHIPPED / f'{QUICK}.r1.jsonl'}", "--runs", str(tmp_path / "runs"),
                       "--json", str(tmp_path / "results.json"))  # one cassette (the notebook replays a folder)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"[1/1] {QUICK} r1: passed" in out
    assert "replayed from recordings, not a live model; recorded from: authored scripts, not a model" in out
    assert "approvals: approve=all: every card answered by the host's policy, no person" in out
    assert "task  " in out and "95% CI (Wilson)" in out and "refusals by code: none" in out
    row = next(line for line in out.splitlines() if line.startswith(QUICK))
    assert row.split()[1:4] == ["1/1", "100%", "[21%,"]  # Wilson: 1 of 1 is [21 %, 100 %]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["overall"]["passes"] == 1 and results["runs"][0]["cassette"].endswith(f"{QUICK}.r1.jsonl")
    assert results["runs"][0]["replay_note"] is None  # the prompts and tools are what the cassette recorded


@pytest.mark.slow
@requires_sandbox
def test_a_recording_replays_to_the_same_verdicts(tmp_path):
    """The wrong script recorded, then replayed: the same failing check, by name, both times."""
    from kernel_ext.eval.tasks import TASKS

    tapes = tmp_path / "tapes"
    live = besser_eval("--provider", "scripted:wrong", "--tasks", QUICK, "--record", str(tapes),
                       "--runs", str(tmp_path / "a"), "--json", str(tmp_path / "a.json"))
    assert live.returncode == 1, live.stdout + live.stderr  # a run failed its verifier
    assert [p.name for p in tapes.iterdir()] == [f"{QUICK}.r1.jsonl"]
    wrong_fails = TASKS[QUICK].wrong_fails
    assert f"{QUICK} r1: FAILED (" in live.stdout and wrong_fails in live.stdout
    replayed = besser_eval("--provider", f"replay:{tapes}", "--runs", str(tmp_path / "b"), "--json", str(tmp_path / "b.json"))
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    first, second = (json.loads((tmp_path / f"{n}.json").read_text())["runs"][0] for n in "ab")
    assert wrong_fails in first["report"]["failed"]
    verdicts = [[(c["name"], c["passed"]) for c in run["report"]["checks"]] for run in (first, second)]
    assert verdicts[0] == verdicts[1] and second["provider"] == f"replay:{QUICK}.r1.jsonl"
    assert first["metrics"]["tool_calls"] == second["metrics"]["tool_calls"]


@pytest.mark.slow
@requires_sandbox
def test_a_changed_prompt_is_noted_and_the_recorded_answers_still_judged(tmp_path):
    """A regression test outlives a prompt change: the answers are replayed regardless, the note says where."""
    lines = (SHIPPED / f"{QUICK}.r1.jsonl").read_text().splitlines()
    first = json.loads(lines[1])
    first["system"] = "A planning prompt someone rewrote. " + first["system"]
    tapes = tmp_path / "tapes"
    tapes.mkdir()
    (tapes / f"{QUICK}.r1.jsonl").write_text("\n".join([lines[0], json.dumps(first), *lines[2:]]) + "\n")
    done = besser_eval("--provider", f"replay:{tapes}", "--runs", str(tmp_path / "r"), "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert run["passed"] and run["replay_note"] == ("request #1 differs from the recording at request.system; "
                                                    "answers replayed regardless")
    assert f"replay note: {QUICK} r1: request #1 differs from the recording at request.system" in done.stdout


@pytest.mark.slow
@requires_sandbox
def test_ctrl_c_keeps_the_runs_that_finished(tmp_path):
    """SIGINT after the first of two runs: the finished run's table and JSON stay, one named line, 130."""
    clean = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
    results = tmp_path / "results.json"
    child = subprocess.Popen([sys.executable, "-m", "kernel_ext", "eval", "--provider", "scripted:oracle",
                              "--tasks", ",".join(PAIR), "--runs", str(tmp_path / "runs"), "--json", str(results)],
                             env=clean, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    seen = []
    assert child.stdout is not None
    for line in child.stdout:  # the event meant: the first run's verdict is printed (and its JSON written)
        seen.append(line)
        if line.startswith(f"[1/2] {PAIR[0]} r1: "):
            break
    assert seen and seen[-1].startswith(f"[1/2] {PAIR[0]} r1: passed"), "".join(seen)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=300)

    assert child.returncode == 130, out + err
    assert "Traceback" not in err and err.strip().splitlines() == ["error: interrupted: Ctrl-C after 1 of 2 runs; 1 kept above"]
    assert "[2/2]" not in out and any(row.startswith(PAIR[0]) and "1/1" in row for row in out.splitlines())
    assert "stopped after 1 of 2 planned runs: interrupted by Ctrl-C (the run under way was not verified)" in out
    kept = json.loads(results.read_text())
    assert [r["task_id"] for r in kept["runs"]] == [PAIR[0]] and kept["runs"][0]["passed"]
    assert kept["planned"] == 2 and kept["stopped"].startswith("interrupted by Ctrl-C")


@pytest.mark.slow
@requires_sandbox
def test_an_endpoint_that_is_down_stops_the_suite_and_is_named(tmp_path):
    """A live endpoint nobody listens on: the first run ends on the connection error, which is said, and
    the other runs are not started (each would end the same way)."""
    with socket.socket() as probe:  # a loopback port that was free a moment ago, now closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = besser_eval("--provider", "openai", "--model", "gpt-4o-mini", "--tasks", ",".join(PAIR),
                       "--runs", str(tmp_path / "runs"), "--json", str(tmp_path / "r.json"),
                       env={"OPENAI_API_KEY": "sk-test-not-a-key", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"})
    line = one_line(done)
    assert line.startswith(f"error: stopped: the provider did not answer (UPSTREAM_LLM: could not reach http://127.0.0.1:{port}/v1")
    assert f"[1/2] {PAIR[0]} r1: FAILED" in done.stdout and "could not reach" in done.stdout and "[2/2]" not in done.stdout
    kept = json.loads((tmp_path / "r.json").read_text())
    assert len(kept["runs"]) == 1 and kept["planned"] == 2 and "could not reach" in kept["runs"][0]["metrics"]["error"]
    ledger = next(c for c in kept["runs"][0]["report"]["checks"] if c["name"] == "generator_files_intact")
    assert ledger["detail"] == "no run.json: the run ended 'failed' before the host wrote its ledger"  # not "Phase 1 unfinished"
    assert not (tmp_path / "runs" / f"{PAIR[1]}.r1").exists()
