"""The export built in a child process, for the server (``hosting/export/apart``), on the real demo run
and a real child: the notebook is the one the builder makes in process, byte for byte, in bounded
chunks; a refusal comes back with its own code and words; a child that fails unnamed, one over the
size cap or one past its time is one named line. (Issue 30 item 4: the module's mutation survivors.)"""

from __future__ import annotations

import asyncio
import io
import json
import sys

import pytest
from export_fixtures import demo_run, inflate_turns, run_copy  # noqa: F401 - fixtures requested by name

from kernel_ext.hosting.export import apart
from kernel_ext.hosting.export.notebook import notebook_text
from kernel_ext.hosting.export.record import ExportRefused

KNOWN = "hunter2-correct-horse-battery"  # a known secret no key shape catches: cut only if it reaches the child


def without_ids(text: str) -> dict:
    """A notebook's JSON with its cells' ids left out (nbformat draws them at random)."""
    notebook = json.loads(text)
    for cell in notebook["cells"]:
        del cell["id"]
    return notebook


def refused(code: str, run_dir, known=(), **kwargs) -> str:
    with pytest.raises(ExportRefused) as caught:
        asyncio.run(apart.notebook_chunks(run_dir, known, **kwargs))
    assert caught.value.code == code and "\n" not in caught.value.message
    return caught.value.message


def test_the_childs_notebook_is_the_builders_in_bounded_chunks(run_copy):  # noqa: F811
    inflate_turns(run_copy, 3 * 2**20)  # a notebook of several chunks
    request = run_copy / ".besser" / "request.json"
    asked = json.loads(request.read_text(encoding="utf-8"))
    request.write_text(json.dumps({**asked, "request": f"{asked['request']} using {KNOWN}"}), encoding="utf-8")
    chunks = asyncio.run(apart.notebook_chunks(run_copy, (KNOWN,)))
    assert without_ids(b"".join(chunks).decode("utf-8")) == without_ids(notebook_text(run_copy, (KNOWN,)))
    assert KNOWN.encode() not in b"".join(chunks) and b" using [redacted]" in b"".join(chunks)
    assert len(chunks) > 1 and max(len(c) for c in chunks) <= 256 * 1024


def test_a_refusal_in_the_child_comes_back_with_its_code_and_words(run_copy):  # noqa: F811
    gone = run_copy.parent / "no-such-run"
    with pytest.raises(ExportRefused) as in_process:
        notebook_text(gone, ())
    assert refused(in_process.value.code, gone) == in_process.value.message


def test_a_notebook_over_the_cap_is_refused_naming_the_cap(run_copy, monkeypatch):  # noqa: F811
    size = len(notebook_text(run_copy, ()).encode("utf-8"))
    monkeypatch.setattr(apart, "MAX_NOTEBOOK_BYTES", size)  # exactly its size: still exported
    assert len(b"".join(asyncio.run(apart.notebook_chunks(run_copy, ())))) == size
    monkeypatch.setattr(apart, "MAX_NOTEBOOK_BYTES", 2**20)
    inflate_turns(run_copy, 2 * 2**20)
    assert refused("NOT_EXPORTABLE", run_copy) == "the notebook would be over 1 MiB"


def test_a_child_past_its_time_is_ended_and_named(run_copy):  # noqa: F811
    assert refused("NOT_EXPORTABLE", run_copy, timeout=0.01) == "the export did not finish within 0 s"


# -- how the parent reads a child: a stand-in child program (labelled: the real child cannot be made to
# print noise, invalid UTF-8 or its environment), a real process all the same -------------------------

def stand_in(monkeypatch, program: str) -> None:
    monkeypatch.setattr(apart, "_CHILD", "import json, os, sys\n" + program)


def test_a_refusal_is_the_last_line_of_what_the_child_said_whatever_came_before(run_copy, monkeypatch):  # noqa: F811
    stand_in(monkeypatch, "sys.stderr.buffer.write(b'x' * 100000 + b'\\na warning \\xff\\xfe not UTF-8\\n')\n"
                          "print(json.dumps({'code': 'RUN_NOT_FOUND', 'message': 'no such run'}), file=sys.stderr)\n"
                          "sys.exit(2)")
    assert refused("RUN_NOT_FOUND", run_copy) == "no such run"


def test_a_child_that_fails_without_naming_why_is_one_line_with_its_exit_status(run_copy, monkeypatch):  # noqa: F811
    stand_in(monkeypatch, "sys.stderr.write('Traceback (most recent call last):\\n  boom\\n'); sys.exit(3)")
    assert refused("NOT_EXPORTABLE", run_copy) == "the export process failed (exit status 3)"


@pytest.mark.parametrize("home", ["/home/someone", None])
def test_the_child_gets_the_scrubbed_environment_with_the_servers_home_and_no_key(run_copy, monkeypatch, home):  # noqa: F811
    stand_in(monkeypatch, "print(json.dumps({'code': 'ENV', 'message': json.dumps(dict(os.environ))}), file=sys.stderr)\n"
                          "sys.exit(2)")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-" + "Z9y8" * 10)
    if home is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home)
    env = json.loads(refused("ENV", run_copy))
    assert "OPENAI_API_KEY" not in env and not any("Z9y8Z9y8" in v for v in env.values())
    assert env["HOME"] == (home or "/")


# -- the child's side (``main``), run in this process on the real run: the order on stdin, the notebook
# on stdout, a refusal one JSON line on stderr ---------------------------------------------------------

def run_main(monkeypatch, order: dict) -> tuple[int, bytes, str]:
    stdin = io.TextIOWrapper(io.BytesIO(json.dumps(order).encode()), encoding="utf-8")
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", stderr)
    status = apart.main()
    monkeypatch.undo()
    return status, stdout.buffer.getvalue(), stderr.getvalue()


def test_the_child_writes_the_notebook_of_the_run_it_was_sent_with_the_keys_it_was_sent(run_copy, monkeypatch):  # noqa: F811
    request = run_copy / ".besser" / "request.json"
    asked = json.loads(request.read_text(encoding="utf-8"))
    request.write_text(json.dumps({**asked, "request": f"{asked['request']} using {KNOWN}"}), encoding="utf-8")
    status, out, said = run_main(monkeypatch, {"run_dir": str(run_copy), "known": [KNOWN]})
    assert status == 0 and said == ""
    assert without_ids(out.decode("utf-8")) == without_ids(notebook_text(run_copy, (KNOWN,)))
    assert KNOWN.encode() not in out


def test_the_child_names_a_refusal_on_its_last_line_and_writes_no_notebook(run_copy, monkeypatch):  # noqa: F811
    gone = run_copy.parent / "no-such-run"
    with pytest.raises(ExportRefused) as in_process:
        notebook_text(gone, ())
    status, out, said = run_main(monkeypatch, {"run_dir": str(gone), "known": []})
    assert status != 0 and out == b""
    assert json.loads(said.strip().splitlines()[-1]) == {"code": in_process.value.code, "message": in_process.value.message}
