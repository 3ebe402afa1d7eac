"""The evaluation's results in a notebook: the table and a small SVG chart, as one HTML display.

No widget state and no JavaScript: an object with ``_repr_html_`` (and the terminal table as
``text/plain``), so a saved notebook, nbviewer and GitHub show the same thing. Every colour is a
class from ``widgets.theme``'s one stylesheet (``--jp-*`` variables), so the chart follows the
person's JupyterLab theme. The chart draws each task's pass rate as a bar and its Wilson interval
as a whisker; the bar's words (k/n and the rate) say what its length says.
"""

from __future__ import annotations

from typing import Any

from kernel_ext.eval import results as res
from kernel_ext.eval.results import INTERVAL, SuiteResults, Tally, percent, to_text
from kernel_ext.safetext import shown_text
from widgets.render import badge, esc
from widgets.theme import STYLE

ROW = 22  # px per task in the chart
LABEL = 210  # px for the task names
BAR = 260  # px for 0..100 %
TAIL = 110  # px for the "k/n rate" words


def chart_svg(results: SuiteResults) -> str:
    """Pass rate per task (and overall) as bars, the 95 % Wilson interval as a whisker."""
    named: list[tuple[str, Tally]] = [*results.tasks().items(), ("overall", results.overall())]
    width, height = LABEL + BAR + TAIL, ROW * (len(named) + 1) + 6
    parts = [f'<svg class="besser-eval-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="pass rate per task with its {esc(INTERVAL)}">',
             f"<title>pass rate per task, {esc(INTERVAL)}</title>"]
    for tick in (0, 50, 100):
        x = LABEL + BAR * tick / 100
        parts.append(f'<line class="besser-eval-grid" x1="{x:.1f}" y1="2" x2="{x:.1f}" y2="{height - ROW}"/>'
                     f'<text class="besser-eval-label" x="{x:.1f}" y="{height - 6}" text-anchor="middle">{tick}%</text>')
    for index, (name, tally) in enumerate(named):
        y = 4 + index * ROW
        low, high = tally.interval
        tone = "besser-eval-pass" if tally.passes == tally.runs else "besser-eval-fail" if tally.passes == 0 else "besser-eval-some"
        mid = y + (ROW - 6) / 2
        parts += [
            f'<text class="besser-eval-label" x="{LABEL - 6}" y="{mid + 4:.1f}" text-anchor="end">{esc(name)}</text>',
            f'<rect class="besser-eval-track" x="{LABEL}" y="{y}" width="{BAR}" height="{ROW - 6}"/>',
            f'<rect class="{tone}" x="{LABEL}" y="{y}" width="{BAR * tally.rate:.1f}" height="{ROW - 6}"/>',
            f'<line class="besser-eval-whisker" x1="{LABEL + BAR * low:.1f}" y1="{mid:.1f}" x2="{LABEL + BAR * high:.1f}" y2="{mid:.1f}"/>',
            *(f'<line class="besser-eval-whisker" x1="{x:.1f}" y1="{mid - 4:.1f}" x2="{x:.1f}" y2="{mid + 4:.1f}"/>'
              for x in (LABEL + BAR * low, LABEL + BAR * high)),
            f'<text class="besser-eval-label" x="{LABEL + BAR + 6}" y="{mid + 4:.1f}">'
            f"{tally.passes}/{tally.runs} {percent(tally.rate)}</text>",
        ]
    parts.append("</svg>")
    return "".join(parts)


def table_html(results: SuiteResults) -> str:
    rows = res.table_rows(results)
    head = "".join(f"<th>{esc(c)}</th>" for c in res.COLUMNS)
    body = []
    for index, row in enumerate(rows):
        tally_row = "besser-eval-overall" if index == len(rows) - 1 else ""
        passes, runs = (int(n) for n in row[1].split("/"))
        verdict = badge("passed" if passes == runs else "failed")
        cells = [f"<td><code>{esc(row[0])}</code></td>", f"<td>{verdict} {esc(row[1])}</td>",
                 *(f"<td>{esc(cell)}</td>" for cell in row[2:])]
        body.append(f'<tr class="{tally_row}">{"".join(cells)}</tr>')
    return f'<table class="besser-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def results_html(results: SuiteResults) -> str:
    overall = results.overall()
    header = "<br>".join(esc(line.strip()) for line in res.who_answered(results))
    notes = [f"tool calls: {res.counts(overall.tool_calls)}",
             "refusals by code: " + ("; ".join(res.refusal_lines(overall)) or "none"),
             f"Phase 3 repair rounds: {overall.repairs}; runs ended: {res.counts(overall.ended)}; cards: {res.counts(overall.approvals)}",
             *res.replay_notes(results)]
    return (f'{STYLE}<div class="besser-eval"><div class="besser-meta">{header}</div>{chart_svg(results)}'
            f"{table_html(results)}<div class=\"besser-meta\">{'<br>'.join(esc(n) for n in notes)}</div></div>")


class ResultsView:
    """``display(ResultsView(results))``: the chart and table in a notebook, the text table elsewhere."""

    def __init__(self, results: SuiteResults):
        self.results = results

    def _repr_html_(self) -> str:
        return results_html(self.results)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": shown_text(to_text(self.results)), "text/html": results_html(self.results)}

    def __repr__(self) -> str:
        return shown_text(to_text(self.results))
