"""``sh_plan``: a static risk class for a shell command, without running it.

The command is split as a shell would (``lexer``); each top-level segment is judged on
its own and the worst one wins (``verdict.RANK``). Wrappers (``sudo``, ``env``, ``timeout``,
``nice``, ``xargs``, ...) are peeled off, ``git`` is judged per subcommand, ``find`` by its
``-exec``/``-delete`` payload, and code handed to an interpreter (``sh -c``, ``python -c``,
a here-document fed to ``bash``) is judged as code that runs. What only run time decides
(substitution, output redirection, globs, control flow) is ``complex``, but its inner commands
are still judged, so a destructive verb never hides inside ``$(...)``. Where the structure
cannot be trusted (a parse problem, text piped into a shell) a loose scan of the raw text
backs it up. Every doubt resolves toward the worse class.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from kernel_ext.shellplan.code import STDIN_NAMES, interpreter_verdict, is_interpreter, raw_scan
from kernel_ext.shellplan.deletion import deletion
from kernel_ext.shellplan.git import classify_git
from kernel_ext.shellplan.lexer import Parsed, Redirect, Segment, Word, parse
from kernel_ext.shellplan.reach import SEVERE_WRITE, UNPLACED, Reach, write_landing
from kernel_ext.shellplan.rules import classify_program
from kernel_ext.shellplan.scan import Scan, fork_bomb
from kernel_ext.shellplan.segments import (
    LEADING_KEYWORDS,
    after_options,
    assignment,
    cd_target,
    downloads,
    find_roots,
    fold,
    redefines,
    segment_text,
    start_paths,
)
from kernel_ext.shellplan.undo import NO_CONTEXT, PlanContext
from kernel_ext.shellplan.verdict import (
    COMPLEX,
    DESTRUCTIVE,
    NETWORK,
    RANK,
    READ_ONLY,
    RUNS_DOWNLOAD,
    UNKNOWN,
    Plan,
    Verdict,
    bad,
    mut,
    net,
    ro,
    runs_script,
    unknown,
    value_of,
    worst,
)
from kernel_ext.shellplan.words import MAX_COMMAND_CHARS
from kernel_ext.shellplan.wrappers import CHDIR, WRAPPERS

MAX_DEPTH = 8
HEADER_KEYWORDS = frozenset({"for", "case", "select", "function", "coproc"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"})
_XARGS_VALUED = frozenset(["-a", "--arg-file", "-d", "--delimiter", "-E", "-e", "-I", "-L", "-n", "--max-args", "-P",
                           "--max-procs", "-s", "--max-chars", "--process-slot-var"])
_SSH_VALUED = frozenset(["-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b", "-c", "-e", "-E", "-m", "-O", "-Q", "-S",
                         "-W", "-w", "-B"])
_NEUTRAL_TARGETS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")
_POSITIONAL = re.compile(r"\$(?:\{[@*1-9]\}|[@*1-9])")  # "$1", $@, ${1}: the names find or xargs hands a shell
_DEVICE = Scan(r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)|\bof=/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)")


def classify(command: str, context: PlanContext = NO_CONTEXT) -> Plan:
    """The plan of ``command`` (never raises on odd input: what cannot be parsed is ``complex``);
    ``context``: the run's checkpoints and starting folder, so a covered deletion is reversible."""
    parsed = parse(command)
    verdict, segments = _command(parsed, command, 0, Reach(context=context))
    return Plan(command, verdict.category, verdict.reversible, verdict.effects, verdict.notes, tuple(segments))


def _command(parsed: Parsed, text: str, depth: int, reach: Reach = UNPLACED) -> tuple[Verdict, list[tuple[str, str]]]:
    parts: list[Verdict] = []
    shown: list[tuple[str, str]] = []
    piped_network = False
    previous_op = ""
    feed: tuple[str, ...] = ()  # what a ``find`` earlier in this pipeline names on its output
    downloaded: set[str] = set()  # files an earlier segment downloaded (``curl -o x.sh``, ``curl URL > x.sh``)
    for seg in parsed.segments:
        piped = previous_op in ("|", "|&")
        feed = feed if piped else ()
        verdict = _segment(seg, depth, reach if reach.feed == feed else replace(reach, feed=feed))
        if seg.op == "&":
            verdict = verdict.at_least(COMPLEX, "runs in the background")
        if verdict.runs_stdin and previous_op in ("|", "|&"):
            verdict = verdict.at_least(COMPLEX, "a shell or interpreter runs whatever the pipe feeds it")
            raw = raw_scan(text, loose=True)
            verdict = worst([verdict, raw]) if raw else verdict
            if piped_network:
                verdict = verdict.at_least(DESTRUCTIVE, RUNS_DOWNLOAD)
        if downloaded.intersection(fold(s) for s in verdict.scripts):
            verdict = verdict.at_least(DESTRUCTIVE, f"{RUNS_DOWNLOAD} (a file an earlier command downloaded)")
        if verdict.category == NETWORK:
            downloaded.update(downloads(seg, verdict))
        piped_network = (piped_network if previous_op in ("|", "|&") else False) or verdict.category == NETWORK
        roots = find_roots(seg)
        feed = reach.fed(roots).feed if roots is not None else feed
        if not piped and seg.op not in ("|", "|&", "&"):  # a cd in a pipeline or the background moves a subshell only
            is_cd, folder = cd_target(seg)
            reach = reach.moved(folder) if is_cd else reach
        previous_op = seg.op
        parts.append(verdict)
        shown.append((segment_text(seg), verdict.category))
    if parsed.problem:
        parts.append(Verdict(COMPLEX, False, notes=(f"cannot be parsed as a shell would: {parsed.problem}",)))
        raw = raw_scan(text, loose=True)
        if raw:
            parts.append(raw)
    if _DEVICE.search(text):
        parts.append(bad("overwrite", ("block device",), "writes to a raw disk device"))
    changed = next((why for seg in parsed.segments if (why := redefines(seg))), "")
    if changed:
        parts.append(unknown(f"the command {changed}: a name may then run another program"))
    if fork_bomb(text):
        parts.append(bad(note="a fork bomb"))
    if not parts:
        parts.append(ro())
    return worst(parts), shown


def _classify_text(text: str, depth: int, reach: Reach = UNPLACED) -> Verdict:
    if depth > MAX_DEPTH:
        return Verdict(COMPLEX, False, notes=("nested too deeply to analyse",))
    return _command(parse(text), text, depth, reach)[0]


def _segment(seg: Segment, depth: int, reach: Reach = UNPLACED) -> Verdict:
    parts: list[Verdict] = []
    inherited = reach.fresh()  # a subshell or substitution starts in the same folder, with its own input
    for inner in seg.groups:
        empty = Verdict(COMPLEX, False, notes=("defines a function",))
        parts.append(_classify_text(inner, depth + 1, inherited) if inner.strip() else empty)
    targets = [r.target for r in seg.redirects if r.target is not None]
    subs = [_classify_text(sub, depth + 1, inherited) for word in (*seg.words, *targets) for sub in word.subs]
    parts.extend(v.at_least(COMPLEX, "command substitution runs at run time") for v in subs)
    if any(v.category == NETWORK for v in subs) and _runs_code(seg.words):
        parts.append(bad("run", (), f"{RUNS_DOWNLOAD} (fed through a substitution)"))
    words = list(seg.words)
    while words and not words[0].quoted and words[0].text in LEADING_KEYWORDS:
        words.pop(0)
    if len(words) > 2 and not words[0].quoted and words[0].text == "function":  # function g { BODY: judge BODY
        words = [w for w in words[2:] if w.text not in ("()", "{", "(", ")")] or words
        parts.append(Verdict(COMPLEX, False, notes=("defines a function",)))
    if words and not words[0].quoted and words[0].text in HEADER_KEYWORDS:
        parts.append(Verdict(COMPLEX, False, notes=(f"'{words[0].text}' control flow",)))
        return worst(parts)
    command = [w.text for w in seg.words if not assignment(w)]  # keywords count: ``fi > out`` redirects a block
    bare = not seg.groups and (not command or command in ([":"], ["true"]))
    for redirect in seg.redirects:
        parts.append(_redirect(redirect, reach, bare))
    while words and assignment(words[0]):
        words.pop(0)
    if words:
        parts.append(_words(words, depth, seg, reach))
    return worst(parts) if parts else ro()


def _redirect(redirect: Redirect, reach: Reach = UNPLACED, bare: bool = False) -> Verdict:
    """Where output lands. Into a device, kernel file, home, system path or out of the workspace,
    appended or not: destructive. Onto a workspace or scratch file: decided at run time (complex),
    but a redirect with no command (``> main.py``, ``: > main.py``) empties the file: a deletion."""
    target = redirect.target.text if redirect.target is not None else ""
    if redirect.op in ("<", "<<", "<<-", "<<<") or (redirect.op in (">&", "<&") and (target.isdigit() or target == "-")):
        return ro()
    if target in _NEUTRAL_TARGETS:
        return ro()
    if _DEVICE.search(">" + target):
        return bad("overwrite", (target,), "writes to a raw disk device")
    append = redirect.op in (">>", "&>>")
    op = "append" if append else "overwrite"
    where = write_landing(target, reach.cwd) if redirect.target is not None else "unknown"  # $HOME/x is a home
    if where in SEVERE_WRITE:
        how = f"appends to {target}, outside the workspace" if append else f"{SEVERE_WRITE[where]} ({target})"
        return bad(op, (target,), f"output redirection {how}")
    if bare and not append and where == "workspace" and redirect.op != "<>":
        return deletion([target], reach, f"a redirect with no command empties {target}", op="truncate")
    note = f"output redirection {'appends to' if append else 'overwrites'} {target or 'a file'}"
    return Verdict(COMPLEX, False, ((op, (target,)),), (note,))


_CODE_RUNNERS = frozenset(["eval", "source", "."])


def _runs_code(words: list[Word]) -> bool:
    """Whether a segment runs code it is handed: a shell, an interpreter, eval or source anywhere in
    it (a wrapper may come first), or a program name that is itself a substitution."""
    program = next((w for w in words if not (not w.quoted and w.text in LEADING_KEYWORDS) and not assignment(w)), None)
    if program is not None and program.subs:
        return True
    for word in words:
        name = os.path.basename(word.text)
        if not word.quoted and not word.dynamic and (name in SHELLS or name in _CODE_RUNNERS or is_interpreter(name)):
            return True
    return False


def _words(words: list[Word], depth: int, seg: Segment, reach: Reach = UNPLACED) -> Verdict:
    program = words[0]
    args = words[1:]
    texts = [w.text for w in args]
    floor: list[Verdict] = []
    if any(w.glob for w in args):
        floor.append(Verdict(COMPLEX, False, notes=("a glob expands to file names only at run time",)))
    if program.dynamic:
        found = [Verdict(COMPLEX, False, notes=("the program name is computed at run time",))]
        if program.glob:
            expanded = " ".join(re.sub(r"[{},]", " ", w.text) for w in words)
            found.append(_classify_text(expanded, depth + 1, reach))
        return worst(found + floor)
    name = os.path.basename(program.text)
    if name in WRAPPERS:
        return worst([_wrapper(name, args, depth, seg, reach), *floor])
    if name in SHELLS:
        return worst([_shell(args, depth, seg, reach), *floor])
    if is_interpreter(name):
        return worst([interpreter_verdict(name, texts, seg.heredocs), *floor])
    if name == "find":
        return worst([_find(args, depth, reach), *floor])
    if name == "xargs":
        return worst([_xargs(args, depth, seg, reach), *floor])
    if name == "eval":
        return worst([_classify_text(" ".join(texts), depth + 1, reach), *floor]) if texts else ro()
    if name in ("source", "."):
        fed = _fed_code(seg) if texts[:1] and texts[0] in STDIN_NAMES else []
        read = [_classify_text(body, depth + 1, reach) for body in fed]
        sourced = runs_script(texts[0], "runs a script in the current shell") if texts else unknown("source with no file")
        return worst([sourced, *read, *floor])
    if name == "script":
        code = value_of(texts, ("-c", "--command"))
        return _classify_text(code, depth + 1, reach) if code is not None else unknown("script records a shell")
    if name == "parallel" and ":::" in texts:  # parallel CMD ::: ARGS: CMD with each argument appended
        at = texts.index(":::")
        return worst([_classify_text(" ".join([*texts[:at], *texts[at + 1:]]), depth + 1, reach), *floor])
    if name == "su":
        code = value_of(texts, ("-c", "--command"))
        return _classify_text(code, depth + 1, reach) if code is not None else unknown("su opens a root shell")
    if name == "ssh":
        rest = after_options(texts, _SSH_VALUED)
        remote = [net("ssh talks to the network")]
        if len(rest) > 1:
            remote.append(_classify_text(" ".join(rest[1:]), depth + 1))
        return worst(remote + floor)
    if name == "watch":
        rest = after_options(texts, frozenset({"-n", "--interval", "-q", "--equexit", "-s", "--shell"}))
        return _classify_text(" ".join(rest), depth + 1, reach) if rest else ro()
    verdict = classify_git(texts, reach) if name == "git" else classify_program(name, texts, reach)
    if name in ("awk", "gawk", "mawk", "nawk") and verdict is not None and verdict.category != READ_ONLY:
        raw = raw_scan(" ".join(texts), loose=True)  # system("...") runs a shell command
        verdict = worst([verdict, raw]) if raw else verdict
    if verdict is None:
        local = "/" in program.text
        kind = "a local script" if local else f"{name!r}, a program not known to the planner"
        verdict = runs_script(program.text, f"runs {kind}") if local else unknown(f"runs {kind}")
    return worst([verdict, *floor])


def _wrapper(name: str, args: list[Word], depth: int, seg: Segment, reach: Reach = UNPLACED) -> Verdict:
    valued, operands = WRAPPERS[name]
    texts = [w.text for w in args]
    if name == "command" and any(t in ("-v", "-V") for t in texts):
        return ro()
    folder = value_of(texts, CHDIR.get(name, ()))
    reach = reach.moved(folder) if folder is not None else reach  # env -C DIR, sudo -D DIR: the command runs there
    if name == "env":
        split = value_of(texts, ("-S", "--split-string"))
        if split is not None:
            return _classify_text(split, depth + 1, reach)
    if name in ("flock", "runuser"):
        code = value_of(texts, ("-c", "--command"))
        if code is not None:
            return _classify_text(code, depth + 1, reach)
    i = 0
    while i < len(args):
        if texts[i] == "--":
            i += 1
            break
        if not texts[i].startswith("-") or texts[i] == "-":
            break
        i += 2 if texts[i] in valued else 1
    while name == "env" and i < len(args) and assignment(args[i]):
        i += 1
    i += operands
    rest = args[i:]
    note = f"{name} asks for root privileges (there is no root in the sandbox)" if name in ("sudo", "doas") else ""
    if not rest:
        return unknown(f"{name} without a command opens a shell") if name in ("sudo", "doas") else ro()
    inner = _words(rest, depth, seg, reach)
    return worst([inner, ro(note)]) if note else inner


def _shell(args: list[Word], depth: int, seg: Segment, reach: Reach = UNPLACED) -> Verdict:
    i = 0
    code: Word | None = None
    reads_stdin = False  # -s: commands come from stdin, the operands are only arguments
    while i < len(args):
        text = args[i].text
        if text in ("-o", "-O", "+o", "+O"):
            i += 2
            continue
        if text in ("--", "-"):
            i += 1
            reads_stdin = reads_stdin or text == "-"
            break
        if text.startswith("-") and not text.startswith("--") and "c" in text[1:] and i + 1 < len(args):
            code = args[i + 1]
            break
        if text.startswith("-") and not text.startswith("--") and "s" in text[1:]:
            reads_stdin = True
        if not text.startswith(("-", "+")):
            break
        i += 1
    if code is None and not reads_stdin and i < len(args) and args[i].text not in STDIN_NAMES:
        return runs_script(args[i].text, f"runs the shell script {args[i].text!r}")
    if code is not None:
        names = " ".join(reach.sweep)
        text = code.text
        if reach.sweep and len(text) + len(names) * len(_POSITIONAL.findall(text)) <= MAX_COMMAND_CHARS:
            text = _POSITIONAL.sub(lambda _m: names, text)  # find -exec sh -c '... "$1"' _ {}: the names are the swept ones
        elif reach.sweep:
            return _classify_text(text, depth + 1, reach).at_least(COMPLEX, "too many names to follow into the code")
        verdict = _classify_text(text, depth + 1, reach)
        return verdict.at_least(COMPLEX, "the code is computed at run time") if code.dynamic else verdict
    fed = _fed_code(seg)
    if fed:
        return worst([_classify_text(body, depth + 1, reach) for body in fed])
    return Verdict(UNKNOWN, False, notes=("a shell reading commands from its input",), runs_stdin=True)


def _fed_code(seg: Segment) -> list[str]:
    """The literal code a segment feeds on stdin: here-documents and here-strings (``sh <<< 'rm -rf /'``)."""
    strings = [r.target.text for r in seg.redirects if r.op == "<<<" and r.target is not None and not r.target.dynamic]
    return [*seg.heredocs, *strings]


def _find(args: list[Word], depth: int, reach: Reach = UNPLACED) -> Verdict:
    texts = [w.text for w in args]
    roots = start_paths(texts)
    parts = [ro()]
    i = 0
    while i < len(texts):
        text = texts[i]
        if text == "-delete":
            parts.append(_find_delete(roots, texts, reach))
        elif text in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(texts) and texts[j] not in (";", "+"):
                j += 1
            payload = args[i + 1 : j]
            if payload:  # run on every match under the roots: a sweep of them
                swept = reach.swept(roots, cwd_in_root=text in ("-execdir", "-okdir"))
                parts.append(_words(payload, depth + 1, Segment(), swept))
            i = j
        elif text in ("-fprint", "-fprint0", "-fprintf", "-fls") and i + 1 < len(texts):
            where = write_landing(texts[i + 1], reach.cwd)
            parts.append(bad("write", (texts[i + 1],), f"find {text} {SEVERE_WRITE[where]}") if where in SEVERE_WRITE
                         else mut("write", (texts[i + 1],)))
        i += 1
    return worst(parts)


_FIND_FILTERS = frozenset(["-name", "-iname", "-path", "-ipath", "-regex", "-iregex", "-wholename", "-newer", "-mtime",
                           "-mmin", "-size", "-empty", "-user", "-perm"])


def _find_delete(roots: list[str], texts: list[str], reach: Reach) -> Verdict:
    """``find ROOTS ... -delete``: a bulk deletion under ROOTS (``deletion``): reversible only when a
    checkpoint of this run covers every root. With no filter every match goes: destructive."""
    where = roots or ["."]
    if reach.sweep or not _FIND_FILTERS.intersection(texts):
        return bad("delete", tuple(where), "find -delete removes every match")
    return deletion(where, reach, f"find -delete removes the matches under {', '.join(where)}", root=True)


def _xargs(args: list[Word], depth: int, seg: Segment, reach: Reach = UNPLACED) -> Verdict:
    texts = [w.text for w in args]
    i = 0
    while i < len(texts) and texts[i].startswith("-"):
        i += 2 if texts[i] in _XARGS_VALUED else 1
    payload = args[i:]
    if not payload:
        return ro()
    inner = reach.swept(reach.feed, appends=True) if reach.feed else reach.fresh()  # names from a find in the pipe
    return _words(payload, depth + 1, seg, inner).at_least(READ_ONLY, "xargs runs the command on input it reads at run time")


def rank(category: str) -> int:
    return RANK[category]
