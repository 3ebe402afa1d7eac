"""The run view's colours come from JupyterLab's theme, and its text is readable there.

The stylesheet (``widgets.theme``) is parsed: every colour in it is a ``--jp-*`` variable (a
fallback inside the ``var()`` is allowed, for pages without JupyterLab), and no HTML the view
renders carries a colour of its own. Then each text colour the sheet uses is resolved in
JupyterLab's own theme files (the installed ``@jupyterlab/theme-dark-extension`` and
``theme-light-extension``), composited over the background it is shown on, and held to WCAG AA
for body text (4.5:1). Syntax colours are JupyterLab's editor colours and are not re-judged here.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from widgets.runview import RunView
from widgets.theme import stylesheet

THEMES = Path(sys.prefix) / "share" / "jupyter" / "lab" / "themes" / "@jupyterlab"
DATA = Path(__file__).parent / "data"
COLOUR_PROPERTIES = re.compile(r"(?:^|-)(color|background|border|outline|fill|stroke)(?:-|$)")
LITERAL = re.compile(r"#[0-9a-fA-F]{3,8}\b|\b(?:rgba?|hsla?|hwb|lab|lch|oklch|oklab)\(|\b(?:white|black|red|green|blue|gr[ae]y|orange|yellow|purple)\b")


def declarations(css: str) -> list[tuple[str, str, str]]:
    """(selector, property, value) of every declaration (one level of @container is read through)."""
    out = []
    css = re.sub(r"@container[^{]*\{((?:[^{}]*\{[^{}]*\})*)\s*\}", r"\1", css)
    for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        for declaration in body.split(";"):
            if ":" in declaration:
                prop, value = declaration.split(":", 1)
                out.append((selector.strip(), prop.strip().lower(), value.strip()))
    return out


def strip_theme_variables(value: str) -> str:
    """``value`` with each ``var(--jp-..., fallback)`` (balanced) and ``color-mix`` of them removed."""
    while True:
        match = re.search(r"var\(--jp-[a-z0-9-]+", value)
        if match is None:
            break
        depth, end = 0, match.start()
        for end in range(match.start(), len(value)):
            depth += {"(": 1, ")": -1}.get(value[end], 0)
            if depth == 0 and value[end] == ")":
                break
        value = value[: match.start()] + "THEME" + value[end + 1 :]
    return re.sub(r"color-mix\(in srgb, THEME \d+%, transparent\)", "THEME", value)


def test_every_colour_in_the_stylesheet_is_a_theme_variable():
    checked = 0
    for selector, prop, value in declarations(stylesheet()):
        if COLOUR_PROPERTIES.search(prop):
            checked += 1
            assert not LITERAL.search(strip_theme_variables(value)), f"{selector} {{{prop}: {value}}}"
    assert checked > 30
    assert strip_theme_variables("var(--jp-a, #fff) red") == "THEME red"  # the check itself can fail


def test_no_rendered_html_carries_a_colour_of_its_own():
    events = [json.loads(line) for line in (DATA / "library_jwt_run.events.jsonl").read_text().splitlines()]
    page = RunView().replay(events).to_html()
    page = page.split("</style>", 1)[1]
    for style in re.findall(r'style="([^"]*)"', page) + re.findall(r"style='([^']*)'", page):
        assert not re.search(r"color|background|border", style), style


# -- contrast in JupyterLab's own themes --------------------------------------------------------


def theme_variables(name: str) -> dict[str, str]:
    path = THEMES / f"theme-{name}-extension" / "index.css"
    if not path.exists():
        pytest.skip(f"JupyterLab's {name} theme is not installed at {path}")
    return dict(re.findall(r"(--[a-z0-9-]+):([^;}]+)", path.read_text()))


def resolve(value: str, variables: dict[str, str], depth: int = 0) -> str:
    value = value.strip()
    match = re.fullmatch(r"var\((--[a-z0-9-]+)(?:,\s*(.+))?\)", value)
    if match is None or depth > 20:
        return value
    name, fallback = match.groups()
    if name in variables:
        return resolve(variables[name], variables, depth + 1)
    assert fallback is not None, f"{name} is undefined"
    return resolve(fallback, variables, depth + 1)


NAMED = {"white": (255, 255, 255, 1.0), "black": (0, 0, 0, 1.0), "transparent": (0, 0, 0, 0.0), "red": (255, 0, 0, 1.0)}


def rgba(value: str, variables: dict[str, str]) -> tuple[float, float, float, float]:
    value = resolve(value, variables)
    mix = re.fullmatch(r"color-mix\(in srgb, (.+) (\d+)%, transparent\)", value)
    if mix:
        r, g, b, a = rgba(mix.group(1), variables)
        return r, g, b, a * int(mix.group(2)) / 100
    if value in NAMED:
        return NAMED[value]
    if value.startswith("#"):
        digits = value[1:]
        if len(digits) in (3, 4):
            digits = "".join(c * 2 for c in digits)
        r, g, b = (int(digits[i : i + 2], 16) for i in (0, 2, 4))
        return r, g, b, int(digits[6:8], 16) / 255 if len(digits) == 8 else 1.0
    parts = [float(p) for p in re.findall(r"[\d.]+", value)]
    assert value.startswith("rgb") and len(parts) in (3, 4), value
    return parts[0], parts[1], parts[2], parts[3] if len(parts) == 4 else 1.0


def over(top: tuple[float, ...], bottom: tuple[float, ...]) -> tuple[float, float, float, float]:
    a = top[3]
    return tuple(top[i] * a + bottom[i] * (1 - a) for i in range(3)) + (1.0,)  # type: ignore[return-value]


def luminance(colour: tuple[float, ...]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in colour[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(text: tuple[float, ...], background: tuple[float, ...]) -> float:
    high, low = sorted((luminance(text), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def text_pairs() -> list[tuple[str, str, str]]:
    """(selector, text colour, background) of every rule that sets a text colour (syntax colours aside);
    a rule without a background of its own is read on the page's (``--jp-layout-color0``)."""
    rules: dict[str, dict[str, str]] = {}
    for selector, prop, value in declarations(stylesheet()):
        rules.setdefault(selector, {})[prop] = value
    pairs = []
    for selector, props in rules.items():
        colour = props.get("color")
        if colour is None or "mirror-editor" in colour or colour == "inherit":
            continue
        pairs.append((selector, colour, props.get("background", "var(--jp-layout-color0)")))
    return pairs


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_text_meets_wcag_aa_in_jupyterlab_themes(theme):
    variables = theme_variables(theme)
    page = rgba("var(--jp-layout-color0)", variables)
    pairs = text_pairs()
    assert any("besser-meta" in s for s, _, _ in pairs) and any("besser-badge" in s for s, _, _ in pairs)
    for selector, colour, background in pairs:
        ground = over(rgba(background, variables), page)
        text = over(rgba(colour, variables), ground)
        ratio = contrast(text, ground)
        assert ratio >= 4.5, f"{theme}: {selector} {colour} on {background} is {ratio:.2f}:1"


def test_the_old_grey_would_have_failed():
    """The check is not vacuous: the view's former meta grey (#57606a) on the dark page fails AA."""
    variables = theme_variables("dark")
    assert contrast(rgba("#57606a", variables), rgba("var(--jp-layout-color0)", variables)) < 4.5
