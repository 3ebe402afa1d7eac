"""The results' arithmetic: the Wilson interval, and sums and refusal recoveries read from real runs.

The runs are real (pipeline, boundary, sandboxed app host, verifier) with authored scripts: one
that trips two guards (an edit whose old text is not in the file, then a read of a file that does
not exist) and recovers from one of them, and the null script. Their metrics, not hand-made
dicts, feed the aggregation, the text table, the JSON and the notebook's HTML.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from api_fixtures import requires_sandbox

from kernel_ext.eval.results import SuiteResults, Tally, to_text, wilson

# -- the interval ----------------------------------------------------------------------------------


def wilson_by_quadratic(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The same interval from its definition: the p whose score statistic |p̂ - p| / sqrt(p(1-p)/n) is z."""
    p_hat = k / n
    a, b, c = 1 + z * z / n, -(2 * p_hat + z * z / n), p_hat * p_hat
    root = math.sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (8, 10), (3, 7), (15, 15), (0, 15), (50, 100)])
def test_wilson_is_the_score_interval(k, n):
    low, high = wilson(k, n)
    want_low, want_high = wilson_by_quadratic(k, n)
    assert low == pytest.approx(max(0.0, want_low), abs=1e-9) and high == pytest.approx(min(1.0, want_high), abs=1e-9)
    assert 0.0 <= low <= k / n <= high <= 1.0
    mirrored = wilson(n - k, n)  # failures are the mirror image of passes
    assert (low, high) == pytest.approx((1 - mirrored[1], 1 - mirrored[0]))


def test_wilson_known_values_and_edges():
    assert wilson(1, 1) == pytest.approx((0.2065, 1.0), abs=1e-4)  # one pass proves little
    assert wilson(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson(15, 15)[0] == pytest.approx(0.7961, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(3, 2)


# -- real runs ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    """Two real runs of library-cors: one that trips two guards and recovers from one, and the null script."""
    from kernel_ext.eval.runner import run_task, verifier_host
    from kernel_ext.eval.scripts import close, edit, plan, provider, read, turns
    from kernel_ext.eval.tasks import TASKS
    from kernel_ext.eval.tasks.library_ops import CORS_LINE, ORIGIN
    from kernel_ext.providers.scripted import Script

    task = TASKS["library-cors"]
    fixed = f'allow_origins=["{ORIGIN}"],'
    stumbling = Script.of("library-cors-stumbling", turns(
        plan(f"Restrict CORS to {ORIGIN}"),
        [edit("backend/main_api.py", 'allow_origins=["*"],\n', fixed)],  # not the file's text: refused
        [read("backend/cors_settings.py")],  # no such file: refused, and never read again
        [edit("backend/main_api.py", CORS_LINE, fixed)],  # the same tool again, right this time: recovered
        close([("backend/main_api.py", fixed)]),
    ))
    base = tmp_path_factory.mktemp("runs")
    with verifier_host() as host:
        stumbled = run_task(task, provider(stumbling), base / "stumbling", host)
        null = run_task(task, provider(task.script("null")), base / "null", host)
    return stumbled, null


def rows(*outcomes):
    return [{**o.as_dict(), "repeat": 1} for o in outcomes]


@requires_sandbox
@pytest.mark.slow
def test_a_refusal_followed_by_a_success_of_the_same_tool_counts_as_recovered(real_runs):
    stumbled, _ = real_runs
    metrics = stumbled.metrics
    assert stumbled.passed, stumbled.report.to_text()
    edit_code, read_code = (_code(stumbled, tool) for tool in ("modify_file", "read_file"))
    assert metrics.refusals == {edit_code: 1, read_code: 1} if edit_code != read_code else {edit_code: 2}
    assert metrics.recovered == {edit_code: 1}  # the read was never followed by a read that worked
    assert metrics.tool_calls == {"modify_file": 2, "read_file": 1, "task_list": 1}


@requires_sandbox
@pytest.mark.slow
def test_the_results_sum_real_runs(real_runs, tmp_path):
    stumbled, null = real_runs
    results = SuiteResults({"spec": "scripted:test", "kind": "scripted", "label": "scripted:test",
                            "notice": "authored turns, not a model"},
                           {"policy": "approve=all: test", "shell": "off"}, rows(stumbled, null))
    (tally,) = results.tasks().values()
    assert (tally.runs, tally.passes, tally.interval) == (2, 1, wilson(1, 2))
    assert dict(tally.failed_checks) == dict.fromkeys(null.report.failed, 1) and tally.failed_checks  # the null run's named checks
    assert tally.turns == stumbled.metrics.turns + null.metrics.turns
    assert tally.wall_s == pytest.approx(stumbled.metrics.wall_s + null.metrics.wall_s)
    edit_code = _code(stumbled, "modify_file")

    data = results.as_dict()
    assert data["interval"] == "Wilson score interval, 95 %"
    assert data["overall"]["refusals"][edit_code] == {"hits": 1, "recovered": 1}
    assert data["overall"]["interval"] == [round(v, 4) for v in wilson(1, 2)]
    results.write(tmp_path / "r.json")
    assert SuiteResults.read(tmp_path / "r.json").as_dict() == json.loads(json.dumps(data))  # round trip

    text = to_text(results)
    assert re.search(r"^library-cors\s+1/2\s+50%\s+\[9%, 91%\]", text, re.MULTILINE), text
    assert f"{edit_code}: hit 1, recovered 1" in text and "approvals: approve=all: test; shell tools off" in text
    assert "provider: scripted:test (scripted)" in text and "authored turns, not a model" in text


@requires_sandbox
@pytest.mark.slow
def test_the_notebook_view_draws_the_same_numbers_in_theme_colours(real_runs):
    from test_widgets_theme import LITERAL, strip_theme_variables

    from widgets.eval_view import ResultsView

    stumbled, null = real_runs
    results = SuiteResults({"spec": "scripted:test", "kind": "scripted", "label": "scripted:test"},
                           {"policy": "approve=all", "shell": "off"}, rows(stumbled, null))
    bundle = ResultsView(results)._repr_mimebundle_()
    assert bundle["text/plain"] == to_text(results)
    page = bundle["text/html"].split("</style>", 1)[1]
    assert "<svg" in page and "<script" not in page and "1/2 50%" in page and "[9%, 91%]" in page
    for null_check in null.report.failed:
        assert null_check in page
    for attribute in re.findall(r'(?:style|fill|stroke|color)="([^"]*)"', page):
        assert not LITERAL.search(strip_theme_variables(attribute)), attribute  # colours come from the theme's classes


def test_an_empty_tally_has_the_widest_interval():
    assert Tally().interval == (0.0, 1.0) and Tally().rate == 0.0


def _code(outcome, tool: str) -> str:
    """The error code the run's own event log gave ``tool``'s refusal (the guard it hit)."""
    for line in (outcome.run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "tool_result" and event["name"] == tool and not event["ok"]:
            return event["error_code"]
    raise AssertionError(f"{tool} was never refused")
