"""``make bench``'s record: ``run_all.py --only X`` replaces X's rows and keeps the others with their
dates; a missed target shows its measured reason (or says there is none); the tracked issue's
figures are named as their scripts emit them.

The bench scripts here are real ones run by ``run_all`` in their own interpreters, written into a
scratch bench folder; only the clock that dates a run is set, so two runs a minute apart need no wait.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import textwrap
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return {name: importlib.import_module(name) for name in ("run_all", "record", "report", "tracked", "common")}


def _script(folder: Path, name: str, median: float, *, target: str = "", miss: str = "") -> None:
    """A bench script that emits one figure ``<name> figure`` of ``median`` ms (with a target, a miss reason)."""
    (folder / f"bench_{name}.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(BENCH)!r})
        from common import Target, emit, figure
        target = {target!r}
        emit([figure({name + " figure"!r}, [{median}], "ms", target=Target("<=", float(target)) if target else None,
                     miss={miss!r})])
    """), encoding="utf-8")


@pytest.fixture
def folder(tmp_path, bench, monkeypatch):
    run_all = bench["run_all"]
    monkeypatch.setattr(run_all, "BENCH", tmp_path)
    monkeypatch.setattr(run_all, "RECORD", tmp_path / "results.json")
    monkeypatch.setattr(run_all, "RESULTS", tmp_path / "RESULTS.md")
    logs = tmp_path.parent / f"{tmp_path.name}-logs"  # run_all's log folders, out of the bench folder
    logs.mkdir()
    monkeypatch.setattr(run_all.tempfile, "tempdir", str(logs))
    return tmp_path


def _at(bench, monkeypatch, when: str) -> None:
    monkeypatch.setattr(bench["run_all"], "_now", lambda: when)


def _figures_by_script(path: Path) -> dict[str, tuple[str, list[float]]]:
    data = json.loads(path.read_text())
    return {s["name"]: (s["measured"], [f["median"] for f in s["figures"]]) for s in data["scripts"]}


def test_only_replaces_the_scripts_it_runs_and_keeps_the_others_with_their_dates(bench, folder, monkeypatch):
    _script(folder, "alpha", 10.0)
    _script(folder, "beta", 20.0)
    _at(bench, monkeypatch, "2026-12-01 10:00 UTC")
    assert bench["run_all"].main([]) == 0
    first = (folder / "results.json").read_text()
    assert _figures_by_script(folder / "results.json") == {"bench_alpha.py": ("2026-12-01 10:00 UTC", [10.0]),
                                                           "bench_beta.py": ("2026-12-01 10:00 UTC", [20.0])}
    kept_beta = [s for s in json.loads(first)["scripts"] if s["name"] == "bench_beta.py"]

    _script(folder, "alpha", 11.0)
    _script(folder, "beta", 99.0)  # changed, but not run: its old rows must stay
    _at(bench, monkeypatch, "2026-12-04 09:00 UTC")
    assert bench["run_all"].main(["--only", "alpha"]) == 0
    assert _figures_by_script(folder / "results.json") == {"bench_alpha.py": ("2026-12-04 09:00 UTC", [11.0]),
                                                           "bench_beta.py": ("2026-12-01 10:00 UTC", [20.0])}
    assert [s for s in json.loads((folder / "results.json").read_text())["scripts"] if s["name"] == "bench_beta.py"] == kept_beta
    text = (folder / "RESULTS.md").read_text()
    assert re.search(r"\| bench_alpha\.py \| ok \| \d+ \| 1 \| 2026-12-04 09:00 UTC \|", text)
    assert re.search(r"\| bench_beta\.py \| ok \| \d+ \| 1 \| 2026-12-01 10:00 UTC \|", text)
    assert "| alpha | alpha figure | 11.00 ms |" in text and "| beta | beta figure | 20.00 ms |" in text
    assert "99.00" not in text and "10.00 ms" not in text


def test_an_unknown_topic_is_named_and_nothing_is_written(bench, folder, capsys):
    _script(folder, "alpha", 10.0)
    with pytest.raises(SystemExit):
        bench["run_all"].main(["--only", "alhpa"])
    assert "no such bench script: bench_alhpa.py" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["bench_alpha.py"]


def test_a_record_that_is_not_one_is_named_and_left_alone(bench, folder, capsys):
    _script(folder, "alpha", 10.0)
    (folder / "results.json").write_text('{"scripts": []}')
    with pytest.raises(SystemExit):
        bench["run_all"].main([])
    assert "is not a bench record" in capsys.readouterr().err
    assert (folder / "results.json").read_text() == '{"scripts": []}' and not (folder / "RESULTS.md").exists()


def test_a_script_that_fails_keeps_its_output_in_the_results(bench, folder, monkeypatch):
    (folder / "bench_broken.py").write_text("print('half-way'); raise SystemExit('the bench broke here')\n")
    _script(folder, "alpha", 10.0)
    assert bench["run_all"].main([]) == 1
    text = (folder / "RESULTS.md").read_text()
    assert "| bench_broken.py | failed (exit 1) |" in text and "the bench broke here" in text


def test_a_miss_shows_its_measured_reason_a_met_target_drops_it_and_a_bare_miss_is_said(bench, folder, monkeypatch):
    _script(folder, "slow", 50.0, target="10", miss="the sandbox's start is 40 ms of it")
    _script(folder, "fast", 5.0, target="10", miss="never shown: the target is met")
    _script(folder, "bare", 50.0, target="10")
    assert bench["run_all"].main([]) == 0
    misses = (folder / "RESULTS.md").read_text().split("## Misses", 1)[1].split("## Figures", 1)[0]
    assert "- slow / slow figure: 50.00 ms against <= 10 ms: the sandbox's start is 40 ms of it" in misses
    assert f"- bare / bare figure: 50.00 ms against <= 10 ms: {bench['report'].NO_REASON}" in misses
    assert "fast" not in misses
    record = json.loads((folder / "results.json").read_text())
    (fast,) = [s["figures"][0] for s in record["scripts"] if s["name"] == "bench_fast.py"]
    assert fast["met"] is True and fast["miss"] == ""


def test_a_target_on_besser_reads_the_ratio_to_besser(bench):
    common = bench["common"]

    def cold(median: float, besser: float | None = 1500.0):
        return common.figure("cold", [median], "ms", baseline=("bare", [1300.0]),
                             besser=("probe", [besser]) if besser else None,
                             target=common.Target("<=", 1 / 3, on_besser=True), miss="why")

    met = cold(450.0)  # 0.30x BESSER: met; against the bare baseline (0.35x) it would have missed
    assert met.target == "<= 0.333x BESSER" and met.met is True and met.miss == ""
    missed = cold(600.0)  # 0.40x BESSER
    assert missed.met is False and missed.miss == "why"
    assert "= 0.40x" in bench["report"].row(missed)[6]
    assert cold(450.0, besser=None).met is None  # BESSER not driven: neither met nor missed


def _emitted_name_patterns(script: Path) -> list[re.Pattern[str]]:
    """Every string the script could name a figure with: literals, and f-strings with each field as a wildcard."""
    patterns = []
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            patterns.append(re.compile(re.escape(node.value)))
        elif isinstance(node, ast.JoinedStr):
            parts = [re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in node.values]
            patterns.append(re.compile("".join(parts)))
    return patterns


def test_every_tracked_figure_is_named_as_its_script_emits_it(bench):
    for t in bench["tracked"].FIGURES:
        script = BENCH / f"bench_{t.group}.py"
        assert script.exists(), f"{t.item}: no {script.name}"
        assert any(p.fullmatch(t.figure) for p in _emitted_name_patterns(script)), f"{t.item}: {script.name} names no '{t.figure}'"


def test_the_issue_table_shows_each_tracked_figure_with_its_target_or_says_it_is_absent(bench):
    common, record, report, tracked = (bench[k] for k in ("common", "record", "report", "tracked"))
    first, *others = tracked.FIGURES
    fig = common.figure(first.figure, [400.0], "ms", target=common.Target("<=", 500), group=first.group)
    text = report.markdown([record.ScriptResult(f"bench_{first.group}.py", "ok", 1.0, "2026-12-04 00:00 UTC", figures=[fig])],
                           {"date": "2026-12-04 00:01 UTC"})
    table = text.split(f"## {tracked.ISSUE}", 1)[1].split("## Misses", 1)[0]
    row = f"| {first.item} | {first.group} / {first.figure} | 400.0 ms |  | {first.target} | <= 500 ms | yes | 2026-12-04 00:00 UTC |"
    assert row in table
    for t in others:
        assert f"| {t.item} | {t.group} / {t.figure} | absent: not in this record" in table


def test_render_writes_the_results_from_the_record_and_runs_nothing(bench, folder, monkeypatch):
    _script(folder, "alpha", 10.0)
    _at(bench, monkeypatch, "2026-12-01 10:00 UTC")
    assert bench["run_all"].main([]) == 0
    record = (folder / "results.json").read_text()
    (folder / "RESULTS.md").unlink()
    (folder / "bench_alpha.py").write_text(f"open({str(folder / 'ran')!r}, 'w')\n")  # a run would leave this mark
    assert bench["run_all"].main(["--render"]) == 0
    assert not (folder / "ran").exists() and (folder / "results.json").read_text() == record
    assert "| alpha | alpha figure | 10.00 ms |" in (folder / "RESULTS.md").read_text()
    (folder / "bench_alpha.py").unlink()  # a script removed from bench/: its rows go with it
    assert bench["run_all"].main(["--render"]) == 0
    assert "alpha" not in (folder / "RESULTS.md").read_text() and "alpha" not in (folder / "results.json").read_text()
