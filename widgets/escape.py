"""HTML for any shown value: the one escape every view uses (render, links, cards)."""

from __future__ import annotations

import html
from typing import Any

from kernel_ext.safetext import shown_text


def esc(value: Any) -> str:
    """HTML for any value: escaped, and shown-not-obeyed (``safetext.shown_text``: HTML escaping
    leaves bidi overrides and line separators live, which could reorder what a card says)."""
    text = str(value)
    if text.isascii() and text.isprintable():  # nothing shown_text would change (the common case, fast)
        return html.escape(text, quote=True)
    return html.escape(shown_text(text), quote=True)
