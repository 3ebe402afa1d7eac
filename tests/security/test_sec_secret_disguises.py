# ruff: noqa: F811 - fixtures imported from jupyter_fixtures / provider_server are requested by name
"""A key written so that no run of it shows is cut all the same, in every sink (issue 28, items 6 and 9).

Red-team findings (verified): a key percent-encoded byte by byte passed into events, SSE, the
view and partial text; a key with a zero-width or format character (U+200C, U+200D, U+034F;
U+200B showed as ``\\u200b`` markers) every six characters was never redacted and the run view
showed it. Now ``kernel_ext.unmask`` reads a text decoded (percent of any byte, ``\\u``/``\\x``
escapes, HTML entities) and past invisible characters, non-ASCII spaces and ``:``, and the view
escapes every invisible character. A second red team (verified end to end: the double-encoded
and the fullwidth key reached the CLI timeline, ``events.jsonl`` and the exported notebook):
nested encodings, ``0x`` bytes, octal escapes, backslash-newline splits, a combining mark after
every character, tag characters, fullwidth and mathematical letters. Now decoding repeats to a
fixed point (three rounds), marks are read past and compatibility letters folded to ASCII.

Every disguise (``secret_disguises.FORMS``, the echo app's own table) against the matcher, a
real loopback endpoint streaming it into partial text, and a REST run on a real Jupyter server
(``events.jsonl``, SSE to a follower, the run view's HTML, every file of the run); what each
sink holds is read back by ``secret_disguises.reveal``, not by the code under test. The
``test_api`` sinks (observation, events, reports) are in tests/test_api_redaction.py.
"""

from __future__ import annotations

import asyncio
import json
import random
import string
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jupyter_fixtures import (  # noqa: F401
    async_client,
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    runs_dir,
)
from misbehaving_endpoint import KEY, REQUEST, done_replies, endpoint_env, reply, tasks_call
from provider_server import Plan, loopback_only, openai_stream, server  # noqa: F401
from secret_disguises import FORMS, INVISIBLE, assert_hidden, disguise, invisible, reveal
from test_providers_openai import conversation, provider

from kernel_ext.hosting.bus import EventLog
from kernel_ext.hosting.events import make_event
from kernel_ext.pipeline.streaming import TextStream
from kernel_ext.safetext import shown_text
from kernel_ext.secrets import FRAGMENT_CHARS, REDACTED, matcher, redact_text

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("fresh_secret_matchers")
SECRET = "Zq8m/W3nT=7xVb=2Lp9/Hk4c=R1yA"  # punctuation the named entities spell, no separator; no known key shape
HEX_FORMS = {"hex-colons", "hex-spaces"}  # cut from 16 digits (8 characters), like any hex


def runs(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(len(text) - size + 1)]


# -- the owner: every disguise is cut, exactly ------------------------------------------------------

@pytest.mark.parametrize("form", list(FORMS))
def test_every_disguise_is_cut_exactly_and_refused(form):
    text = f"echo: {disguise(SECRET, form)} (end)"
    assert reveal(text) != reveal(SECRET) and SECRET[:12] not in text  # no plain run shows
    assert redact_text(text, (SECRET,)) == f"echo: {REDACTED} (end)"
    assert matcher((SECRET,)).found(text)  # what the boundary refuses a call with


@pytest.mark.parametrize("form", [f for f in FORMS if f not in HEX_FORMS])
def test_twelve_characters_in_any_disguise_are_cut_and_eleven_stay(form):
    for piece in runs(SECRET, FRAGMENT_CHARS):
        cut = redact_text(f"<{disguise(piece, form)}>", (SECRET,))  # an invisible character after it may stay
        assert cut.startswith(f"<{REDACTED}") and reveal(cut) == f"<{REDACTED}>", (form, piece, cut)
    for piece in runs(SECRET, FRAGMENT_CHARS - 1):
        kept = f"<{disguise(piece, form)}>"
        assert redact_text(kept, (SECRET,)) == kept, (form, piece)


ORDINARY = [
    "GET /search?q=caf%C3%A9%20au%20lait&page=2 HTTP/1.1",
    '{"name": "Caf\\u00e9", "note": "a\\tb\\n", "path": "C:\\\\Users\\\\x41"}',
    "<p>Fish &amp; chips &lt;3 &#169; 2024 &nbsp;&mdash; &#x1F600;</p>",
    "family: \U0001F468\u200d\U0001F469\u200d\U0001F467, Persian: \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
    "mac 00:1a:2b:3c:4d:5e, ipv6 fe80::1ff:fe23:4567:890a, time 12:34:56, sha 9f86d081884c7d659a2feaa0c55ad015",
    "printf('%s: %d%%\\n', name, 100); re.compile(r'\\d+\\.\\w*'); s = '\\x1b[31mred\\x1b[0m'",
    "\uff28\uff45\uff4c\uff4c\uff4f\u3000\u4e16\u754c\u3001\u3053\u3093\u306b\u3061\u306f\u3002 caf\u00e9 nai\u0308ve r\u00e9sum\u00e9 "
    "\u00c5ngstr\u00f6m \ufb01nance \U0001d401\U0001d428\U0001d425\U0001d41d \u2460 \u00bd \ud55c\uad6d\uc5b4 "
    "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f \U0001f44d\U0001f3fd",
    'char buf[] = {0x41, 0x42, 0x43, 0x44}; printf("\\101\\102\\n"); #define X \\\n  1; %2541 &#37;41 \\u0025',
]


def test_ordinary_prose_and_code_are_unchanged():
    """No over-redaction by the known-secret matcher: the project's own sources and docs, and text
    full of escapes, entities, percent-encoding, colons and joiners, with several random keys known.
    (``redact_text``'s bearer rule cuts "bearer credentials" in prose; that rule is not this one.)"""
    rng = random.Random(28)
    keys = ["".join(rng.choice(string.ascii_letters + string.digits + "/+=-") for _ in range(rng.randint(16, 48))) for _ in range(6)]
    texts = ORDINARY + [p.read_text(encoding="utf-8") for pattern in ("kernel_ext/**/*.py", "widgets/*.py", "docs/*.md", "*.md")
                        for p in sorted(ROOT.glob(pattern))]
    cut = matcher(keys).cut
    changed = [text[:80] for text in texts if cut(text) != text]
    assert changed == [] and len(texts) > 100


# -- properties: random keys, random disguises ----------------------------------------------------

KEYS = st.text(alphabet=string.ascii_letters + string.digits + "/+=-_", min_size=FRAGMENT_CHARS, max_size=48)
SPELLINGS = [lambda c: c, lambda c: f"%{ord(c):02x}", lambda c: f"\\u{ord(c):04X}", lambda c: f"\\\\u{ord(c):04x}",
             lambda c: f"\\x{ord(c):02x}", lambda c: f"&#{ord(c)};", lambda c: f"&#x{ord(c):x};", lambda c: f"\\U{ord(c):08x}",
             lambda c: f"\\{ord(c):03o}", lambda c: f"%25{ord(c):02x}", lambda c: f"%5Cu{ord(c):04x}",
             lambda c: "".join(f"&#{ord(x)};" for x in f"%{ord(c):02X}"), lambda c: f" 0x{ord(c):02x},",
             lambda c: chr(ord(c) + 0xFEE0), lambda c: c + "\u0301", lambda c: c + "\\\n"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=KEYS, data=st.data())
def test_a_key_never_survives_any_mix_of_disguises(key, data):
    assume(len(set(key)) > 4)  # twelve characters of "aaaa..." are not a key
    spelled = []
    for char in key:
        spelled.append(data.draw(st.sampled_from(SPELLINGS))(char))
        spelled.append(data.draw(st.sampled_from(["", "", *INVISIBLE.values(), "\u200b\u200c", ":", " "])))
    around = data.draw(st.text(max_size=20))
    text = f"{around}{''.join(spelled)}{around}"
    assert_hidden(redact_text(text, (key,)), key, "the cut text")


NOISE = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(
    ["%41", "%zz", "&amp;", "&#65;", "&bogus;", "\\u00e9", "\\x41", "\\", "\u200b", "\u200d", "\xa0", ":", "%", "&",
     "%2541", "\\101", " 0x41 ", "\\\n", "\uff41", "\u0301", "\U000e0041" * 4, "\U0001d41a"])), max_size=30)


@settings(max_examples=300, deadline=None)
@given(key=st.text(alphabet=string.ascii_letters + string.digits, min_size=16, max_size=40), parts=NOISE)
def test_text_without_the_key_is_unchanged(key, parts):
    text = "".join(parts)
    shown = reveal(text)
    assume(len(set(key)) > 8 and not any(piece in shown or piece in shown[::-1] for piece in runs(key, 8)))
    assert redact_text(text, (key,)) == text


# -- the view: every invisible character is shown as an escape ---------------------------------------

def test_every_invisible_character_is_read_past_and_shown_escaped():
    from widgets.runview import RunView

    codes = [c for c in range(0x80, 0xE1000) if not 0xD800 <= c <= 0xDFFF and invisible(chr(c))]
    assert len(codes) > 4000
    for code in codes:
        char = chr(code)
        assert char not in shown_text(f"a{char}b"), hex(code)
        seamed = char.join(runs(SECRET, 1))  # one between every two characters
        assert redact_text(f"<{seamed}>", (SECRET,)) == f"<{REDACTED}>", hex(code)
    view = RunView(run_id="r-1", decide=lambda *a, **k: None, note="in-process")
    text = "x\u200bx\u200cx\u200dx\u034fx " + "".join(f"x{chr(code)}" for code in codes[:: len(codes) // 200])
    view.apply(make_event("text", "r-1", text=text).model_copy(update={"seq": 1}))
    rendered = view.to_html()
    assert not [c for c in rendered if invisible(c)] and "x\\u200bx\\u200cx\\u200dx\\u034fx" in rendered


# -- partial text: a real endpoint streams every disguise ------------------------------------------

@pytest.mark.parametrize("form", list(FORMS))
async def test_streamed_partial_text_never_shows_a_disguised_key(server, form):
    said = f"the key is {disguise(KEY, form)} and that is all"
    pieces = [said[i : i + 5] for i in range(0, len(said), 5)]  # many partial events, split anywhere
    server.plan(Plan(chunks=openai_stream(pieces, [], finish="stop")))
    events = EventLog("run-disguise", known_secrets=(KEY,))
    stream = TextStream(events, "r1", interval=0)
    p = provider(server)
    answer = await p.complete(conversation(), on_text=stream.add)
    await p.aclose()
    events.emit("text", text=answer.text, stream=stream.final_id)  # as the loop does
    texts = [e.text for e in events.events]
    assert len(texts) > 10 and texts[-1] == f"the key is {REDACTED} and that is all"
    for n, text in enumerate(texts):
        assert_hidden(text, KEY, f"text event {n}")
    first = reveal(texts[-2])  # the last partial: the key was cut, never its start shown
    assert REDACTED.strip("[]") in first or "thekeyis" in first


# -- a REST run on a real Jupyter server: events, SSE, the view, every file ----------------------

ECHO = " | ".join(f"{form}={disguise(KEY, form)}" for form in FORMS)


def plans() -> list[Plan]:
    return [Plan(chunks=list(reply("openai", call=tasks_call("Add an isbn field to Book")))),
            Plan(chunks=list(reply("openai", [ECHO[i : i + 40] for i in range(0, len(ECHO), 40)]))),
            *done_replies("openai", 4)]


def view_html(lines: list[str]) -> str:
    """The run view as it was after each text event (it keeps the last few texts)."""
    from widgets.runview import RunView

    view, shown = RunView(run_id="r", decide=lambda *a, **k: None, note="in-process"), []
    for line in lines:
        event = json.loads(line)
        view.apply(make_event(event["type"], event["run_id"], **{k: v for k, v in event.items()
                                                                    if k not in ("type", "run_id", "seq", "ts")})
                   .model_copy(update={"seq": event["seq"]}))
        if event["type"] == "text":
            shown.append(view.to_html())
    return "\n".join(shown)


async def test_rest_run_hides_every_disguise_in_every_sink(server, jp_fetch, jp_serverapp, runs_dir, monkeypatch):
    for name, value in endpoint_env(server, "openai").items():
        monkeypatch.setenv(name, value)
    server.plan(*plans())
    body = {"kind": "generate", "request": REQUEST, "model_path": "example:library", "target": "pydantic",
            "provider": "openai", "approve": "edits"}
    started = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    run_id = json.loads(started.body)["run"]["id"]
    async with async_client(jp_serverapp) as client:
        deadline = time.monotonic() + 120
        while (await client.get(f"runs/{run_id}")).json()["run"]["live"] and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        stream = (await client.get(f"runs/{run_id}/events")).text
    lines = (runs_dir / run_id / "events.jsonl").read_text().splitlines()
    sinks = {"events.jsonl": "\n".join(lines), "SSE": stream}
    missing = [(form, sink) for form in FORMS for sink, text in sinks.items() if f"{form}={REDACTED}" not in text]
    assert missing == []  # each disguise arrived in each sink, and was cut exactly there
    sinks["view HTML"] = view_html(lines)  # the view shortens a long text: its first cuts show
    assert f"{next(iter(FORMS))}={REDACTED}" in sinks["view HTML"]
    for sink, text in sinks.items():
        assert_hidden(text, KEY, sink)
    for path in (runs_dir / run_id).rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert_hidden(path.read_bytes(), KEY, str(path))
