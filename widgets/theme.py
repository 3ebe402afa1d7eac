"""The run view's look: one stylesheet whose every colour is a JupyterLab theme variable.

JupyterLab's light, dark and high-contrast themes define the ``--jp-*`` variables, so a view
styled only through them follows the theme the person chose (the class diagram too). Each
``var()`` carries a light fallback for pages that do not define them (nbviewer, GitHub, VS Code
without JupyterLab's variables). Tints (a diff's added line) mix a theme colour with
``transparent``, so the text colour on them stays the theme's own body colour.
tests/test_widgets_theme.py parses this sheet: every colour is a ``--jp-*`` variable, and body
text meets WCAG AA on JupyterLab's dark theme.

A view whose kernel is gone (ipywidgets marks each of its widgets ``jupyter-widgets-disconnected``)
is *detached*: its ``.besser-detached`` parts show, its ``.besser-live`` parts and expiry notes go,
its buttons take no click, and ipywidgets' broken-link icon (one per widget) is not drawn. That is
CSS alone, so it works with no kernel at all.

Status colours carry meaning twice: a badge's coloured edge and its words (colour alone never
says "denied").
"""

from __future__ import annotations

# The variables the view uses, with the fallback each gets outside JupyterLab.
TEXT = "var(--jp-ui-font-color1, rgba(0,0,0,.87))"
META = "var(--jp-ui-font-color2, rgba(0,0,0,.54))"
CONTENT = "var(--jp-content-font-color1, rgba(0,0,0,.87))"
SURFACE = "var(--jp-layout-color0, #fff)"
RAISED = "var(--jp-layout-color2, #eee)"
PANEL = "var(--jp-layout-color1, #fff)"
BORDER = "var(--jp-border-color2, #e0e0e0)"
STRONG_BORDER = "var(--jp-border-color1, #bdbdbd)"
OK = "var(--jp-success-color1, #4caf50)"
WARN = "var(--jp-warn-color1, #ff9800)"
BAD = "var(--jp-error-color1, #f44336)"
INFO = "var(--jp-brand-color1, #1976d2)"
MUTED = "var(--jp-layout-color4, #757575)"
READ = "var(--jp-content-font-size1, 14px)"  # the notebook's own text size: narration read from the back row

# A diff shows side by side once its own box (a container query, in its code font's ``ch``: never
# the viewport) is at least the width its longest line needs on both sides; ``diffview`` picks
# the smallest of these that fits the diff, and a diff wider than the last stays unified.
SPLIT_WIDTHS = (60, 80, 100, 120, 140, 170, 200, 240)

# A status word -> the colour of its badge's edge.
STATUS_TONE = {
    "completed": OK, "executed": OK, "approved": OK, "passed": OK, "verified": OK, "resolved": OK,
    "blocked": WARN, "waiting": WARN, "detached": WARN, "expired": WARN, "interrupted": WARN, "timeout": WARN, "warning": WARN,
    "implemented": WARN,
    "failed": BAD, "denied": BAD, "stale input": BAD, "blocker": BAD, "denied by policy": BAD, "budget_exhausted": BAD,
    "running": INFO, "info": INFO, "queued": INFO,
    "pending": MUTED, "starting": MUTED, "cancelled": MUTED,
    # a command's risk class (shellplan.verdict)
    "read-only": OK, "mutating": WARN, "unknown": WARN, "complex": WARN, "network": BAD, "destructive": BAD,
    "unclassified": MUTED,
}

SYNTAX = {  # pygments token classes -> JupyterLab's editor colours
    "k kc kd kn kp kr kt": "keyword", "s s1 s2 sb sc sd se sh si sx sr ss dl": "string",
    "c c1 ch cm cp cpf cs": "comment", "m mb mf mh mi mo il": "number", "nf fm nc": "def",
    "nb bp": "builtin", "o ow": "operator", "nd": "meta", "na": "attribute", "nt": "tag",
}


def _tint(colour: str, percent: int) -> str:
    return f"color-mix(in srgb, {colour} {percent}%, transparent)"


def stylesheet() -> str:
    syntax = "\n".join(
        f".besser-run .besser-code .{cls}, .besser-card .besser-code .{cls} {{color: var(--jp-mirror-editor-{name}-color, {TEXT})}}"
        for classes, name in SYNTAX.items() for cls in classes.split()
    )
    tones = "\n".join(
        f".besser-st-{word.replace(' ', '-')} {{border-left-color: {tone}}}" for word, tone in STATUS_TONE.items()
    )
    split_rules = "\n".join(
        f"@container (min-width: {width}ch) {{ .besser-diff-w{width} > .besser-diff-split {{display: table}} "
        f".besser-diff-w{width} > .besser-diff-unified {{display: none}} }}" for width in SPLIT_WIDTHS
    )
    return f"""
.besser-run, .besser-card, .besser-request-report {{color: {TEXT}}}
.besser-run table, .besser-card table {{color: inherit; font-size: inherit}}
.besser-run table, .besser-card table, .besser-request-report table {{table-layout: auto; margin-left: 0; margin-right: 0}}
.besser-req-line {{display: grid; grid-template-columns: 2em 5em minmax(10em, 1fr) 4em 5em 6em 5em 6em; gap: 0 12px;
  align-items: baseline; padding: 2px 0 2px 14px; border-bottom: 1px solid {BORDER}}}
.besser-req-head {{font-weight: 600}}
.besser-req > summary {{cursor: pointer; list-style: none; position: relative}}
.besser-req > summary::before {{content: "▸"; position: absolute; left: 0; color: {META}}}
.besser-req[open] > summary::before {{content: "▾"}}
.besser-req-detail {{margin: 4px 0 8px 16px}}
.besser-req-detail b {{color: {TEXT}}}
.besser-req-detail pre {{margin: 2px 0 6px; max-height: 16em; overflow: auto; color: {CONTENT};
  font-family: var(--jp-code-font-family, monospace); font-size: var(--jp-code-font-size, 13px)}}
.besser-meta {{color: {META}; font-size: 90%}}
.besser-run .besser-text, .besser-run .besser-provider, .besser-run .besser-now {{font-size: {READ}; line-height: 1.4}}
.besser-run .besser-text {{color: {CONTENT}}}
.besser-run .besser-provider {{color: {META}}}
.besser-badge {{color: {TEXT}; background: {RAISED}; border: 1px solid {STRONG_BORDER}; border-left: 4px solid {MUTED};
  border-radius: 4px; padding: 0 6px; font-size: 90%; white-space: nowrap}}
{tones}
.besser-banner {{color: {TEXT}; background: {_tint(WARN, 22)}; border-left: 4px solid {WARN}; padding: 2px 8px; margin: 4px 0}}
.besser-error {{color: {TEXT}; border-left: 4px solid {BAD}; padding-left: 6px}}
.besser-card {{border: 1px solid {BORDER}; border-radius: 4px; padding: 4px 8px; margin: 4px 0; background: {SURFACE}}}
.besser-card-open {{border-color: {WARN}; border-width: 2px}}
.besser-card-decided {{border: 0; padding: 0; margin: 0; background: transparent}}
.besser-row {{border-bottom: 1px solid {BORDER}; padding: 1px 0}}
.besser-row > summary {{cursor: pointer; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; list-style-position: inside}}
.besser-row[open] > summary {{white-space: normal}}
.besser-row-tool {{font-family: var(--jp-code-font-family, monospace); font-weight: 600}}
.besser-row-target {{font-family: var(--jp-code-font-family, monospace)}}
.besser-row > .besser-body, .besser-row > .besser-result {{margin: 4px 0 8px 16px}}
.besser-body pre, .besser-result pre, .besser-code {{margin: 2px 0; max-height: 24em; overflow: auto;
  font-family: var(--jp-code-font-family, monospace); font-size: var(--jp-code-font-size, 13px); color: {CONTENT}}}
.besser-code table, .besser-diff table {{border-collapse: collapse; width: 100%}}
.besser-code td, .besser-diff td {{padding: 0 6px; white-space: pre; vertical-align: top; text-align: left}}
/* a static run sits in JupyterLab's rendered HTML, whose tables are right-aligned: ours read from the left */
:is(.besser-run, .besser-card, .besser-request-report) tr > :is(td, th):not(.besser-lineno) {{text-align: left}}
.besser-lineno {{color: {META}; text-align: right !important; user-select: none; width: 1%}}
.besser-diff {{container-type: inline-size; max-height: 28em; overflow: auto; border: 1px solid {BORDER}}}
.besser-diff-split {{display: none}}
{split_rules}
td.besser-add, tr.besser-add > td {{background: {_tint(OK, 18)}}}
td.besser-del, tr.besser-del > td {{background: {_tint(BAD, 18)}}}
.besser-hunk {{color: {META}}}
.besser-hunk > td {{background: {PANEL}}}
.besser-mark {{user-select: none; color: {META}; width: 1%}}
.besser-table {{border-collapse: collapse}}
.besser-table th, .besser-table td {{border-bottom: 1px solid {BORDER}; padding: 1px 8px; text-align: left}}
.besser-result {{margin: 4px 0; padding-left: 6px; border-left: 4px solid {MUTED}}}
.besser-result-ok {{border-left-color: {OK}}}
.besser-result-failed {{border-left-color: {BAD}}}
.besser-args > summary, .besser-report > summary {{cursor: pointer; color: {META}}}
.besser-finding-resolved .besser-finding-text {{text-decoration: line-through; color: {META}}}
.besser-task-verified .besser-task-mark {{color: {TEXT}; font-weight: 700}}
.besser-task-implemented .besser-task-mark {{color: {META}}}
.besser-run a, .besser-card a {{color: {INFO}}}
.besser-detached {{display: none}}
.besser-run.jupyter-widgets-disconnected .besser-detached {{display: revert}}
.besser-run.jupyter-widgets-disconnected .besser-live, .besser-run.jupyter-widgets-disconnected .besser-card-note {{display: none}}
.besser-run.jupyter-widgets-disconnected button {{pointer-events: none; cursor: not-allowed; opacity: .45}}
.besser-card-buttons {{flex-wrap: wrap; align-items: center; gap: 4px 0}}
.besser-run .jupyter-button {{white-space: normal; overflow: visible; text-overflow: clip; height: auto;
  min-height: var(--jp-widgets-inline-height, 28px); line-height: 1.3; flex-shrink: 0; max-width: 100%}}
.besser-card-buttons > .widget-html {{flex: 1 1 auto; min-width: min(26em, 100%); margin-left: 4px}}
.besser-card-buttons .widget-html-content {{line-height: 1.3; white-space: normal}}
.besser-card-note {{display: inline-block}}
.besser-run.jupyter-widgets-disconnected::before, .besser-run .jupyter-widgets-disconnected::before {{content: none; display: none}}
.besser-eval {{color: {TEXT}}}
.besser-eval .besser-table td {{white-space: nowrap}}
.besser-eval-overall td {{border-top: 2px solid {STRONG_BORDER}; font-weight: 600}}
.besser-eval-chart {{display: block; margin: 6px 0}}
.besser-eval-label {{fill: {TEXT}; font-size: 12px}}
.besser-eval-track {{fill: {RAISED}}}
.besser-eval-pass {{fill: {OK}}}
.besser-eval-some {{fill: {WARN}}}
.besser-eval-fail {{fill: {BAD}}}
.besser-eval-whisker {{stroke: {TEXT}; stroke-width: 1.5}}
.besser-eval-grid {{stroke: {BORDER}}}
{syntax}
"""


STYLE = f"<style>{stylesheet()}</style>"


def badge_class(word: str) -> str:
    """The class of a badge for ``word`` (its status tone), e.g. ``besser-st-denied``."""
    key = word.split(" (")[0].split(",")[0].strip().lower()  # "queued, position 2" -> queued
    key = key if key in STATUS_TONE else key.split(" ")[0]
    return f"besser-badge besser-st-{key.replace(' ', '-')}" if key in STATUS_TONE else "besser-badge"
