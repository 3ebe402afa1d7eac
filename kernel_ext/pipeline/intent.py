"""Does this request need a frontend? Word rules, decided before any model call.

A request for something people interact with (app, web app, UI, website, dashboard, portal)
gets a frontend even without a GUI model; an explicitly headless request (API only, backend
only, REST API, no UI) stays backend-only, and headless wins when both appear. In a modify
run a bare "app" names the existing project, so only explicit interface words count there.
Words inside a URL, a host or file name, a path or quoted code are not read
(``https://app.example.org`` asks for no app), nor a run of 48+ non-space characters (no word of
prose; it keeps the reading linear in the request, which is read on the server's event loop).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADLESS = re.compile(
    r"\b(api[- ]only|backend[- ]only|back[- ]end[- ]only|rest(ful)?\s+api|headless|no\s+(ui|frontend|front[- ]end|gui|interface)"
    r"|without\s+(a\s+|any\s+)?(ui|frontend|front[- ]end|gui|user\s+interface)|only\s+(the\s+|an?\s+)?(api|backend))\b",
    re.IGNORECASE,
)
_INTERFACE = re.compile(
    r"\b(web\s*app(lication)?s?|ui|user\s+interface|gui|websites?|web\s+sites?|dashboards?|portals?"
    r"|front[- ]?ends?|web\s+pages?|screens?)\b",
    re.IGNORECASE,
)
# Names that are not prose: URLs, host and file names, dotted attributes, paths, `code`, module:attr.
# Their words say nothing about an interface ("https://app.example.org", "main_api:app", "/ui/").
_NOT_PROSE = re.compile(r"`[^`]*`|\S+://\S*|[\w-]+(?:\.[\w-]+)+|(?<!\S)/\S*|\w+:\w+")
# A run of this many non-space characters is no word of prose either, and ``_NOT_PROSE`` retries its
# alternatives from each position of a run (quadratic in the run: "x" * 19,000 held the server's
# loop 16 s): such runs go first, so a run it reads is at most this long (linear in the request).
_LONG_RUN = re.compile(r"\S{48,}")
# "app" alone, but not when it is an API's or backend's app ("a FastAPI app", "backend app").
_BARE_APP = re.compile(r"(?<!fastapi\s)(?<!api\s)(?<!backend\s)(?<!django\s)(?<!flask\s)\b(apps?|applications?)\b", re.IGNORECASE)


@dataclass(frozen=True)
class FrontendIntent:
    needed: bool
    reason: str


def frontend_intent(request: str, *, modify: bool = False, has_gui_model: bool = False) -> FrontendIntent:
    text = " ".join(_NOT_PROSE.sub(" ", _LONG_RUN.sub(" ", request)).split())
    headless = _HEADLESS.search(text)
    if headless:
        return FrontendIntent(False, f"explicitly headless: {headless.group(0)!r}")
    if has_gui_model:
        return FrontendIntent(True, "the project has a GUI model")
    interface = _INTERFACE.search(text)
    if interface:
        return FrontendIntent(True, f"asks for something people interact with: {interface.group(0)!r}")
    bare = _BARE_APP.search(text)
    if bare and not modify:
        return FrontendIntent(True, f"asks for an {bare.group(0)!r} people use")
    if bare and modify:
        return FrontendIntent(False, f"in a modify run {bare.group(0)!r} names the existing project")
    return FrontendIntent(False, "no interface was asked for")
