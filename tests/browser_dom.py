"""What the browser tests ask of the run view's DOM, computed in the page (Playwright, Chromium).

- ``layout``: where the pending cards sit (``.besser-pending`` before ``.besser-decided`` in
  document order), the banner's words, and how tall each closed ``details.besser-row`` is;
- ``raw_json``: the bodies and rows whose text holds their arguments as raw JSON (``{"path"``);
- ``contrast``: WCAG contrast of a view's text, meta text, a row and a badge against their
  *effective* background (the element's and its ancestors' backgrounds, composited up to the
  first opaque one; every colour is resolved by painting it on a canvas, so ``color-mix`` and
  ``var()`` results count as the page shows them);
- ``detached``: what a view shows once its kernel is gone: the visible pills, banners and card
  notes, ipywidgets' broken-link icons (its ``::before`` glyph U+F127) and broken images, and
  every visible control whose label does not fit (``scrollWidth`` past its box);
- ``cut_controls``, ``card_row``: controls and labels whose text does not fit (``scrollWidth`` past
  their box), and how many lines a card's expiry note takes;
- ``readable``: the narration's and the provider line's font size against ``--jp-content-font-size1``;
- ``diff_box``: which of a diff's tables shows (unified or side by side) and whether it scrolls sideways;
- ``open_page``: go to a notebook's address and wait until the front end has applied its theme
  (the moment the page is styled and ready), reloading once if Jupyter's own front end could not
  load its theme stylesheet from a server under load;
- ``SEEN_JS`` (an init script): the wall-clock time each open card first appears, keyed
  ``run/call``, for ``card_latencies`` (event ``ts`` -> DOM, the bench's figure).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

THEME_READY_JS = """
() => document.body.dataset.jpThemeName ? "ready"
  : [...document.querySelectorAll(".jp-Dialog")].some(d => (d.getAttribute("aria-label") || "").startsWith("Error Loading Theme"))
    ? "theme-error" : null
"""


def open_page(page, address: str) -> None:
    """``page.goto(address)``, then wait for the front end's theme to be applied (``data-jp-theme-name`` on
    the body, set by JupyterLab's and Notebook 7's theme manager once the stylesheet loaded).

    On a server under load (``make test-under-load``) JupyterLab's theme manager can report
    "Error Loading Theme: Stylesheet failed to load" and leave a modal dialog over the page, which then
    takes every click. That is Jupyter's front end, not the extension: the page is loaded again once,
    as a person would, and a second failure fails the test with its name."""
    for attempt in (1, 2):
        if attempt == 1:
            page.goto(address)
        else:
            page.reload()
        state = page.wait_for_function(THEME_READY_JS, timeout=120_000).json_value()
        if state == "ready":
            return
        print(f"open_page: Jupyter's front end could not load its theme stylesheet (attempt {attempt}): {address.split('?')[0]}")
    raise AssertionError(f"Jupyter's front end could not load its theme stylesheet twice: {address.split('?')[0]}")


SEEN_JS = """
(() => {
  window.__besserSeen = {};
  const look = () => {
    for (const card of document.querySelectorAll('.besser-pending .besser-card-open')) {
      const view = card.closest('.besser-run');
      const run = view && view.querySelector('b') ? view.querySelector('b').textContent.replace(/^run\\s+/, '') : '';
      const match = /call id: (\\S+)/.exec(card.textContent || '');  // in the card's folded details
      const key = run + '/' + (match ? match[1] : '?');
      if (!(key in window.__besserSeen)) window.__besserSeen[key] = performance.timeOrigin + performance.now();
    }
  };
  new MutationObserver(look).observe(document, {childList: true, subtree: true, characterData: true});
})();
"""

LAYOUT_JS = """
view => {
  const pending = view.querySelector('.besser-pending'), decided = view.querySelector('.besser-decided');
  const cards = [...view.querySelectorAll('.besser-card')];
  const banner = view.querySelector('div.besser-banner[role=status]');
  const closed = [...view.querySelectorAll('.besser-decided details.besser-row:not([open])')];
  const style = closed.length ? getComputedStyle(closed[0].querySelector('summary')) : null;
  const line = style ? (parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.2) : 20;
  return {
    pending_before_decided: !!(pending && decided && (pending.compareDocumentPosition(decided) & Node.DOCUMENT_POSITION_FOLLOWING)),
    first_card_pending: cards.length > 0 && pending.contains(cards[0]) && cards[0].classList.contains('besser-card-open'),
    open_in_pending: pending ? pending.querySelectorAll('.besser-card-open').length : 0,
    open_elsewhere: [...view.querySelectorAll('.besser-card-open')].filter(c => !pending.contains(c)).length,
    banner: banner ? banner.innerText : null,
    row_heights: closed.map(r => r.getBoundingClientRect().height),
    line_height: line,
    rows: closed.map(r => r.querySelector('summary.besser-row-line').innerText),
  };
}
"""

RAW_JSON_JS = """
view => [...view.querySelectorAll('.besser-body, details.besser-row')]
  .filter(el => el.textContent.includes('{"path"'))
  .map(el => el.className + ': ' + el.textContent.slice(0, 200))
"""

CONTRAST_JS = """
([view, selectors]) => {
  const canvas = document.createElement('canvas'); canvas.width = canvas.height = 1;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const rgba = colour => {  // any CSS colour the page computed -> [r, g, b, a] in 0..1
    ctx.clearRect(0, 0, 1, 1); ctx.fillStyle = '#000'; ctx.fillStyle = colour; ctx.fillRect(0, 0, 1, 1);
    const [r, g, b, a] = ctx.getImageData(0, 0, 1, 1).data;
    return a === 0 ? [0, 0, 0, 0] : [r / 255, g / 255, b / 255, a / 255];
  };
  const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const background = el => {
    const layers = [];
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const colour = rgba(getComputedStyle(node).backgroundColor);
      if (colour[3] > 0) layers.push(colour);
      if (colour[3] >= 0.999) break;
    }
    let result = [1, 1, 1, 1];  // the canvas under the page
    for (const layer of layers.reverse()) result = over(layer, result);
    return result;
  };
  const luminance = c => {
    const lin = v => v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    return 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
  };
  const hex = c => '#' + c.slice(0, 3).map(v => Math.round(v * 255).toString(16).padStart(2, '0')).join('');
  return selectors.map(selector => {
    const el = selector === ':scope' ? view : [...view.querySelectorAll(selector)].find(e => e.getClientRects().length);
    if (!el) return {selector, missing: true};
    const bg = background(el), fg = over(rgba(getComputedStyle(el).color), bg);
    const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
    return {selector, fg: hex(fg), bg: hex(bg), ratio: (hi + 0.05) / (lo + 0.05)};
  });
}
"""

# every visible control or label whose text does not fit its box (cut by an ellipsis or clipped)
CUT_JS = """(view => [...view.querySelectorAll('button, .widget-label, label, .besser-card-note')]
  .filter(el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden' && el.scrollWidth > el.clientWidth + 1)
  .map(el => el.innerText.trim()))"""

# the narration and the provider line: their font size against the notebook's content size
READABLE_JS = """
view => {
  const content = parseFloat(getComputedStyle(document.body).getPropertyValue('--jp-content-font-size1')) || 14;
  return ['.besser-text', '.besser-provider'].map(selector => {
    const el = [...view.querySelectorAll(selector)].find(e => e.getClientRects().length);
    return el ? {selector, px: parseFloat(getComputedStyle(el).fontSize), content} : {selector, missing: true};
  });
}
"""

# the card's button row: each control's box, and the expiry note's height against its line height
CARD_ROW_JS = """
card => {
  const note = card.querySelector('.besser-card-note');
  const style = note ? getComputedStyle(note) : null;
  return {
    note_lines: note ? note.getBoundingClientRect().height / (parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.2) : null,
    cut: (CUT)(card),
  };
}
""".replace("(CUT)", CUT_JS)

# a diff's two tables: which one shows, and whether the box must scroll sideways to show it
# every table cell of a view whose text is not left-aligned (line numbers aside)
ALIGN_JS = """
view => [...view.querySelectorAll('td:not(.besser-lineno), th')].filter(c => c.getClientRects().length)
  .filter(c => !['left', 'start'].includes(getComputedStyle(c).textAlign)).map(c => c.innerText.trim().slice(0, 40))
"""

DIFF_JS = """
diff => ({
  shown: [...diff.querySelectorAll('table')].filter(t => t.getClientRects().length).map(t => t.className),
  scrolls: diff.scrollWidth > diff.clientWidth + 1,
  code_align: [...diff.querySelectorAll('td:not(.besser-lineno):not(.besser-mark)')].filter(td => td.getClientRects().length)
    .map(td => getComputedStyle(td).textAlign).filter((v, i, all) => all.indexOf(v) === i),
  added: [...diff.querySelectorAll('.besser-add')].filter(e => e.getClientRects().length)
    .map(e => getComputedStyle(e.tagName === 'TR' ? e.cells[e.cells.length - 1] : e).backgroundColor),
  width: diff.clientWidth,
})
"""

DETACHED_JS = """
view => {
  const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const texts = selector => [...view.querySelectorAll(selector)].filter(visible).map(el => el.innerText.trim());
  const icons = [view, ...view.querySelectorAll('*')].filter(el => (getComputedStyle(el, '::before').content || '').includes('\\uf127'));
  return {
    pills: texts('.besser-badge'),
    banners: texts('.besser-banner'),
    notes: texts('.besser-card-note'),
    broken_icons: icons.filter(visible).length,
    broken_images: [...view.querySelectorAll('img')].filter(img => visible(img) && !(img.complete && img.naturalWidth > 0)).length,
    cut: (CUT)(view),
  };
}
""".replace("(CUT)", CUT_JS)

# body text of the view, its meta text, a decided row's line, a badge on a row, the narration, the provider line
CONTRAST_TARGETS = [":scope", ".besser-meta", "summary.besser-row-line", ".besser-row .besser-badge",
                    ".besser-row-outcome", ".besser-row-by", ".besser-text", ".besser-provider"]


def cut_controls(view) -> list[str]:
    return view.evaluate(CUT_JS)


def readable(view) -> list[dict]:
    return view.evaluate(READABLE_JS)


def card_row(card) -> dict:
    return card.evaluate(CARD_ROW_JS)


def unaligned(view) -> list[str]:
    return view.evaluate(ALIGN_JS)


def diff_box(diff) -> dict:
    return diff.evaluate(DIFF_JS)


def layout(view) -> dict:
    return view.evaluate(LAYOUT_JS)


def detached(view) -> dict:
    return view.evaluate(DETACHED_JS)


def raw_json(view) -> list[str]:
    return view.evaluate(RAW_JSON_JS)


def contrast(view, selectors: list[str] = CONTRAST_TARGETS) -> list[dict]:
    return view.page.evaluate(CONTRAST_JS, [view.element_handle(), selectors])


def dark_theme(page) -> None:
    """JupyterLab's Settings > Theme > JupyterLab Dark, as a person switches it; until the page says dark."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="JupyterLab Dark").first.click()
    page.wait_for_function("document.body.dataset.jpThemeLight === 'false' && document.body.dataset.jpThemeName === 'JupyterLab Dark'")
    page.wait_for_timeout(500)  # the theme's stylesheet applied (a repaint)


def card_latencies(page, runs: list[Path]) -> list[float]:
    """For each card seen open in the page: ms from its ``approval_requested`` ``ts`` to its DOM."""
    seen: dict[str, float] = page.evaluate("window.__besserSeen || {}")
    samples = []
    for run in runs:
        for line in (run / "events.jsonl").read_text().splitlines():
            event = json.loads(line)
            key = f"{event.get('run_id')}/{event.get('call_id')}"
            if event.get("type") == "approval_requested" and key in seen:
                samples.append(seen[key] - float(event["ts"]) * 1000)
    return samples


def save_latencies(folder: Path, samples: list[float]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    median = statistics.median(samples) if samples else None
    (folder / "card-latency.json").write_text(json.dumps({"unit": "ms", "median": median, "samples": samples}, indent=1))
