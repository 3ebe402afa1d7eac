"""A small, strict Dockerfile reader, and the checks a task asking for a Dockerfile makes.

Strict on purpose: an unknown instruction, a missing ``FROM`` before the first build step, an
exec form (``["a", "b"]``) that is not a JSON list of strings, or a dangling line continuation
is an error naming the line, so a Dockerfile a model wrote from a half-memory fails here the way
``docker build`` would. Parser directives, comments, blank lines and ``\\`` continuations are read
as Docker reads them; here-documents are refused (this reader does not follow them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from kernel_ext.eval.verify import Check, Outcome, Produced

INSTRUCTIONS = frozenset({"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
                          "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"})
EXEC_FORM = frozenset({"CMD", "ENTRYPOINT", "RUN", "SHELL"})
MAX_BYTES = 256 * 1024


class DockerfileError(ValueError):
    pass


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    arguments: str

    def words(self) -> list[str]:
        """The exec form's list, or the shell form split on whitespace."""
        if self.arguments.startswith("["):
            return list(json.loads(self.arguments))
        return self.arguments.split()


def parse(text: str) -> list[Instruction]:
    if len(text.encode()) > MAX_BYTES:
        raise DockerfileError(f"the Dockerfile is over {MAX_BYTES // 1024} KiB")
    out: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continuation is dropped, as Docker does
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        out.append(_instruction(start, " ".join(p.strip() for p in pending if p.strip())))
        pending = []
    if pending:
        raise DockerfileError(f"line {start}: the instruction ends with a line continuation and nothing after it")
    if not out:
        raise DockerfileError("the Dockerfile has no instruction")
    first_build = next((i for i in out if i.keyword != "ARG"), None)
    if first_build is None or first_build.keyword != "FROM":
        raise DockerfileError(f"line {first_build.line if first_build else 1}: the first instruction must be FROM (after ARGs)")
    return out


def _instruction(line: int, text: str) -> Instruction:
    match = re.match(r"([A-Za-z]+)(?:\s+(.*))?$", text)
    if not match:
        raise DockerfileError(f"line {line}: cannot read {text[:40]!r}")
    keyword, arguments = match.group(1).upper(), (match.group(2) or "").strip()
    if keyword not in INSTRUCTIONS:
        raise DockerfileError(f"line {line}: unknown instruction {match.group(1)!r}")
    if not arguments:
        raise DockerfileError(f"line {line}: {keyword} needs arguments")
    if "<<" in arguments and keyword in ("RUN", "COPY", "ADD"):
        raise DockerfileError(f"line {line}: here-documents are not read by this checker")
    if keyword in EXEC_FORM and arguments.startswith("["):
        try:
            words = json.loads(arguments)
        except ValueError:
            raise DockerfileError(f"line {line}: {keyword}'s exec form is not a JSON list") from None
        if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
            raise DockerfileError(f"line {line}: {keyword}'s exec form must be a non-empty list of strings")
    return Instruction(line, keyword, arguments)


def _read(produced: Produced, rel: str) -> list[Instruction]:
    text = produced.text(rel)
    if text is None:
        raise DockerfileError(f"{rel} does not exist")
    return parse(text)


def parses(rel: str = "backend/Dockerfile") -> Check:
    def run(produced: Produced) -> Outcome:
        try:
            found = _read(produced, rel)
        except DockerfileError as exc:
            return False, str(exc)
        return True, f"{len(found)} instructions"

    return Check("dockerfile_parses", f"{rel} exists and reads as a Dockerfile (strictly)", run)


def starts_the_app(rel: str = "backend/Dockerfile", entry: str = "main_api:app") -> Check:
    """The build context holds the app, a COPY brings it in, a RUN installs requirements.txt, and the
    CMD/ENTRYPOINT serves ``entry`` with uvicorn on 0.0.0.0 and an EXPOSEd port."""

    def run(produced: Produced) -> Outcome:
        try:
            found = _read(produced, rel)
        except DockerfileError as exc:
            return False, str(exc)
        module = entry.split(":", 1)[0].replace(".", "/") + ".py"
        folder = rel.rpartition("/")[0]
        for needed in ("requirements.txt", module):  # the build context is the Dockerfile's folder
            if produced.text(f"{folder}/{needed}" if folder else needed) is None:
                return False, f"{needed} is not beside {rel} (the build context)"
        copied = [w for i in found if i.keyword in ("COPY", "ADD") for w in i.words()[:-1] if not w.startswith("--")]
        if not any(w in (".", "./", module, f"./{module}") for w in copied):
            return False, f"no COPY/ADD brings {module} (or the whole folder) into the image"
        runs = " ".join(i.arguments for i in found if i.keyword == "RUN")
        if not re.search(r"pip3?\s+install\b[^&;|]*-r\s+\S*requirements\.txt", runs):
            return False, "no RUN installs requirements.txt with pip"
        starts = [i for i in found if i.keyword in ("CMD", "ENTRYPOINT")]
        if not starts:
            return False, "no CMD or ENTRYPOINT"
        words = [w for i in starts for w in i.words()]
        if "uvicorn" not in " ".join(words) or entry not in words:
            return False, f"the start command {' '.join(words)!r} does not serve {entry} with uvicorn"
        port = words[words.index("--port") + 1] if "--port" in words[:-1] else "8000"
        exposed = {w.split("/")[0] for i in found if i.keyword == "EXPOSE" for w in i.arguments.split()}
        if port not in exposed:
            return False, f"uvicorn listens on {port} but EXPOSE names {sorted(exposed) or 'no port'}"
        if "0.0.0.0" not in words:
            return False, "uvicorn does not listen on 0.0.0.0 (unreachable from outside the container)"
        return True, ""

    return Check("dockerfile_starts_the_app", f"{rel} installs the requirements and serves {entry} with uvicorn", run)
