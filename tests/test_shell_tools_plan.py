"""sh_plan: the static classifier against a labelled corpus, its structural rules, and the approval card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shell_tools_fixtures import harness, needs_bwrap

from kernel_ext.shellplan.plan import classify
from kernel_ext.shellplan.verdict import CATEGORIES, RANK

CORPUS = Path(__file__).parent / "data" / "shell_plan_corpus.jsonl"


def corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_corpus_has_no_under_flags():
    entries = corpus()
    assert len(entries) >= 150
    assert {e["e"] for e in entries} == set(CATEGORIES)
    under, exact = [], 0
    for entry in entries:
        got = classify(entry["c"]).category
        if RANK[got] < RANK[entry["e"]]:
            under.append((entry["c"], entry["e"], got))
        exact += got == entry["e"]
    assert under == []
    assert exact / len(entries) >= 0.95, f"only {exact} of {len(entries)} classified exactly"


def test_corpus_exact_entries_are_neither_under_nor_over_flagged():
    """Entries marked ``exact`` (the red team's classes: a command run by find/xargs/a wrapper/sh -c at the
    outer's targets, the folder a ``cd`` moved to, every sink name and target option) and their ordinary
    neighbours must be classified exactly: the corpus's 95% tolerance does not cover them."""
    exact = [e for e in corpus() if e.get("exact")]
    assert len(exact) >= 50
    wrong = [(e["c"], e["e"], got) for e in exact if (got := classify(e["c"]).category) != e["e"]]
    assert wrong == []


@pytest.mark.parametrize(
    ("command", "category"),
    [
        ("echo 'rm -rf /' ; ls", "read-only"),  # quoted text is data, not a command
        ("git commit -m \"rm -rf build\"", "mutating"),
        ("ls | grep x && rm -rf ~/y", "destructive"),  # worst segment wins
        ("rm -rf /x; echo done", "destructive"),
        ("echo \"$(rm -rf ~/build)\"", "destructive"),  # substitution inside double quotes still runs
        ("ls *.py; echo $(git push --force)", "destructive"),  # complex never hides a destructive verb
        ("sudo env DEBUG=1 timeout 5 nice -n 5 rm -f /a", "destructive"),  # wrappers are unwrapped
        ("xargs -0 -n 1 git push --delete origin", "destructive"),
        ("find . -exec git clean -fdx \\;", "destructive"),
        ("find . -newer x -fprint list.txt", "mutating"),
        ("git push origin main", "network"),
        ("git push --force origin main", "destructive"),
        ("bash -c \"python -c 'import os; os.unlink(\\\"f\\\")'\"", "destructive"),  # interpreters nest
        ("echo hi > /dev/null 2>&1", "read-only"),
        ("echo hi 2> errors.txt", "complex"),  # a redirect is decided at run time (the seed), even into the workspace
            ("echo hi 2> $LOG", "complex"),
    ],
)
def test_structural_rules(command, category):
    assert classify(command).category == category


def test_plan_reports_reversibility_and_file_effects():
    plan = classify("mkdir -p out && cp a.txt out/ && rm -rf ../build")
    data = plan.as_dict()
    assert data["category"] == "destructive" and data["reversible"] is False
    ops = {e["op"]: e["paths"] for e in data["effects"]}
    assert ops["delete"] == ["../build"] and ops["create"] == ["out"] and ops["copy"] == ["out/"]
    assert [s["category"] for s in data["segments"]] == ["mutating", "mutating", "destructive"]
    assert "sh_checkpoint" in data["warning"]
    safe = classify("mkdir out").as_dict()
    assert safe["reversible"] is True and "warning" not in safe


@needs_bwrap
def test_sh_plan_never_executes(tmp_path):
    h = harness(tmp_path)
    before = h.tree()
    result = h.call("sh_plan", command="touch planned.txt && rm -rf ../sub")
    assert result.ok and result.data["category"] == "destructive"
    assert "risk: destructive" in result.observation
    assert h.tree() == before and h.requests == []  # a read tool: no approval card, nothing ran
    assert h.call("sh_plan", command="   ").error.code == "invalid_argument"


@needs_bwrap
def test_approval_card_carries_the_plan_and_the_result_the_risk(tmp_path):
    h = harness(tmp_path)
    (h.ws / "junk").mkdir()
    result = h.call("sh_run", command="rm -rf junk")
    assert result.ok
    card = h.requests[-1]
    assert card.name == "sh_run" and "$ rm -rf junk" in card.proposal
    assert "risk: destructive (not reversible)" in card.proposal and "effect: delete junk" in card.proposal
    assert "no checkpoint taken in this run covers it" in card.proposal
    assert result.data["risk"] == "destructive" and not (h.ws / "junk").exists()  # no checkpoint: not reversible
    prepared = h.shell.prepare(h.executor.catalog.get("sh_run").args_model(command="cat project.txt"))
    assert prepared.plan.category == "read-only"


@needs_bwrap
def test_prepare_data_holds_the_risk_class(tmp_path):
    from kernel_ext.tools.shell import ShRunArgs, prepare_sh_run

    h = harness(tmp_path)
    preparation = prepare_sh_run(ShRunArgs(command="git push --force origin main"), h.executor.context)
    assert preparation.data["risk"] == "destructive"
    assert preparation.data["plan"]["category"] == "destructive"
    assert preparation.proposal.splitlines()[0].startswith("run in the bwrap sandbox")


@needs_bwrap
def test_denied_card_runs_nothing(tmp_path):
    h = harness(tmp_path, approve=False)
    before = h.tree()
    result = h.call("sh_run", command="touch made-by-model")
    assert result.error.code == "approval_denied" and h.tree() == before


SINK_AND_SWEEP = [
    ("mv app.db /dev/null", "move"),
    ("cp /dev/null main.py", "copy"),
    ("sudo mv -t /dev/null a b", "move"),
    ("chmod -R 777 /", "chmod"),
    ("chown -R nobody $HOME", "chown"),
    ("chgrp --recursive staff /home/alice/", "chgrp"),
    ("cp x /dev/stdout", "copy"),  # every device is a sink for a transfer: no alias (/proc/self/fd/1) slips past
    ("find / -exec chmod 777 {} +", "chmod"),
    ("find / | xargs chown u", "chown"),
    ("cd / && chmod -R 777 .", "chmod"),
    ("mv --target-directory=/dev x", "move"),
]


@pytest.mark.parametrize(("command", "op"), SINK_AND_SWEEP)
def test_sinks_and_sweeping_permission_changes_are_destructive(command, op):
    plan = classify(command).as_dict()
    assert plan["category"] == "destructive" and plan["reversible"] is False
    assert any(effect["op"] == op for effect in plan["effects"])


@pytest.mark.parametrize("command", ["chmod -R 755 app/static", "chmod 700 ~", "cp x backup/", "mv a.txt b.txt",
                                     "find . -exec chmod 644 {} +", "cd app && chmod -R u+w ."])
def test_ordinary_moves_and_permission_changes_stay_mutating(command):
    assert classify(command).category == "mutating"


def test_sh_plan_through_the_cli_rates_sinks_destructive(tmp_path):
    """The tool CLI: ``python -m kernel_ext tool --enable-shell sh_plan`` (a read tool; nothing runs)."""
    import subprocess
    import sys

    (tmp_path / "data.db").write_text("rows", encoding="utf-8")
    for command in ("mv data.db /dev/null", "chmod -R 000 ~", "find / | xargs chown u", "cd / && chmod -R 777 .",
                    "mv data.db /proc/self/fd/1"):
        proc = subprocess.run([sys.executable, "-m", "kernel_ext", "tool", "--workspace", str(tmp_path), "--enable-shell",
                               "sh_plan", json.dumps({"command": command})], capture_output=True, text=True, timeout=120)
        result = json.loads(proc.stdout)
        assert result["ok"] is True and result["data"]["category"] == "destructive", proc.stdout
    assert (tmp_path / "data.db").read_text(encoding="utf-8") == "rows"
