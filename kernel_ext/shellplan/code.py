"""Interpreters (``python -c``/``-m``, ``node -e``, here-documents) and text that may run.

``python -c``, ``node -e``, a here-document fed to ``python``: the code counts as executed, so
its calls decide the class (``shutil.rmtree`` destroys, ``urllib`` reaches the network, ``open(..,
'w')`` mutates, ``os.system`` runs anything). Where a shell's structure cannot be trusted (a
parse problem, text piped into a shell, a command string built by code), ``raw_scan`` looks for
destructive or network verbs anywhere in the raw text, quotes included. Both over-flag by design.
"""

from __future__ import annotations

import dataclasses
import re

from kernel_ext.shellplan.reach import SEVERE_WRITE, landing, literal_paths, resolve
from kernel_ext.shellplan.rules import classify_program
from kernel_ext.shellplan.scan import Scan
from kernel_ext.shellplan.verdict import (
    UNKNOWN,
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

STDIN_NAMES = frozenset(["-", "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"])  # a script operand that is the input
_PYTHON = re.compile(r"^(?:python|pypy)[0-9.]*$")
_OTHER_INTERPRETERS = frozenset({"node", "nodejs", "ruby", "perl", "php", "Rscript", "lua"})

# Searched on RE2 (``scan``: linear in the model's text); no lookaround there, so the
# boundaries before and after a program name are consumed (the scans only ask whether).
_B = r"(?:^|[\s;&|(`'\"$])"
_RAW_DESTRUCTIVE = Scan(
    _B + r"(?:rm|shred|unlink|wipefs|mkfs(?:\.\w+)?|truncate|rimraf)(?:\s|$|['\";&|)])|\bdd\s[^;&|]*\bof="
    r"|\bgit\s+(?:push\s[^;&|]*(?:--force|\s-f\b|--delete|--mirror|\s\+)|reset\s+--hard|clean\s+-\w*f|filter-branch"
    r"|checkout\s+--|stash\s+(?:drop|clear))|\bfind\s[^;&|]*-delete|rmtree|rm_rf"
)
_RAW_NETWORK = Scan(
    _B + r"(?:curl|wget|nc|ncat|ssh|scp|rsync|ftp|telnet|socat)(?:\s|$)|\bgit\s+(?:clone|fetch|pull|push)\b"
    r"|\bpip3?\s+install\b|\bnpm\s+(?:install|i|ci)\b"
)
_CODE_DESTROY = Scan(
    r"rmtree|os\.remove|os\.unlink|\.unlink\(|os\.rmdir|\.rmdir\(|remove_dir_all|File\.delete|FileUtils\.rm|rm_rf|rmSync"
    r"|rmdirSync|unlinkSync|fs\.rm\b|fs\.unlink|fs\.rmdir|\.truncate\(|os\.truncate|rimraf|\bunlink\b|(?i:\bdrop\s+table|\bdelete\s+from|\btruncate\s+table)"
)
_CODE_NETWORK = Scan(
    r"urllib|\brequests\b|http\.client|httpx|aiohttp|\bsocket\b|urlopen|\bfetch\(|XMLHttpRequest|\bhttps?\.(?:get|request)"
    r"|net\.(?:connect|createServer)|LWP|Net::HTTP|open-uri|smtplib|ftplib|paramiko|http\.server|websocket"
)
_CODE_EXEC = Scan(
    r"os\.system|subprocess|os\.popen|os\.exec|\bexec\(|\beval\(|child_process|execSync|spawnSync|\bsystem\(|`|\bpopen"
    r"|IO\.popen|Kernel\.|__import__|getattr\(|importlib|\bpty\b"
    # perl/ruby/php forms without parentheses: system "cmd", exec $cmd, qx(cmd), %x(cmd), a piped open
    r"|\b(?:system|exec)\s+[\"'$q@\[]|\bqx\s*[^\w\s]|%x[^\w\s]|\bspawn\s*\(|shell_exec|passthru|proc_open"
    r"|\bopen\s*\([^)]*[\"']\s*(?:\||-\|)"
)
# Code that reads its own input (``python -c "exec(sys.stdin.read())"`` is ``python -`` spelled otherwise).
_READS_INPUT = Scan(r"sys\.stdin|\binput\(|STDIN|process\.stdin|\$stdin|/dev/stdin|fileinput|readFileSync\(\s*0|\bgets\b|<>")
_EVAL_WORD = Scan(r"\beval\s")  # perl and ruby: eval <STDIN>, eval $code
_CODE_EVAL = Scan(r"\bexec\(|\beval\(|\bcompile\(|\bexecfile|new Function|\bload\(|\bloadstring|instance_eval|`")
_CODE_WRITE = Scan(
    r"open\([^)]*['\"](?:[wax]|r\+)|\.write\(|write_text|write_bytes|os\.rename|os\.replace|shutil\.(?:copy|move)"
    r"|os\.makedirs|os\.mkdir|\.mkdir\(|mkdirSync|writeFile|appendFile|renameSync|copyFile|File\.write|\.touch\(|os\.chmod|sqlite3"
)
# Moving or copying onto a sink (a device, a process's descriptor) in code: the data is thrown away.
_CODE_SINK = Scan(
    r"(?:shutil\.(?:move|copy\w*)|os\.(?:rename|replace)|\.rename\(|\.replace\(|copyFile|renameSync|FileUtils\.(?:mv|cp))"
    r"[^;\n]*['\"]/+(?:dev|proc/[^/'\"]+/fd)(?:/|['\"])"
)
_SAFE_PY = frozenset(
    ["sys", "json", "math", "re", "platform", "string", "textwrap", "datetime", "time", "decimal", "fractions", "statistics",
     "itertools", "functools", "collections", "operator", "pprint", "base64", "hashlib", "uuid", "random", "typing", "enum",
     "dataclasses", "keyword", "locale", "calendar"]
)


def code_verdict(lang: str, code: str) -> Verdict:
    """Code given to an interpreter counts as executed: judged by what it names."""
    parts: list[Verdict] = []
    if _CODE_DESTROY.search(code):
        parts.append(bad("delete", (), f"the {lang} code deletes files or data"))
    if _CODE_SINK.search(code):
        parts.append(bad("move", (), f"the {lang} code moves or copies data onto a device or descriptor"))
    if _CODE_NETWORK.search(code):
        parts.append(net(f"the {lang} code uses the network"))
        if _CODE_EVAL.search(code):  # exec(urlopen(...).read()): bounded, over-flagging; not refused (a guess)
            parts.append(bad("run", (), f"the {lang} code uses the network and evaluates code it builds: it may run a download"))
    if _CODE_EXEC.search(code):
        parts.append(unknown(f"the {lang} code runs other programs or dynamic code"))
        raw = raw_scan(code, loose=True)
        if raw:
            parts.append(raw)
    if _CODE_WRITE.search(code):
        severe = [p for p in literal_paths(code) if landing(resolve(p, None)) in SEVERE_WRITE]
        parts.append(bad("write", severe, f"the {lang} code writes files and names {', '.join(severe)}, outside the workspace")
                     if severe else mut("write", (), note=f"the {lang} code writes files"))
    if not parts:
        if lang == "python":
            imports = re.findall(r"(?:^|[;\s])(?:from|import)\s+([\w.]+)", code)
            safe = all(name.split(".")[0] in _SAFE_PY for name in imports) and "open(" not in code and "__" not in code
            parts.append(ro() if safe else unknown(f"the {lang} code imports modules with unknown effects"))
        elif re.search(r"require|import|open|File|fs\.|use\s", code):
            parts.append(unknown(f"the {lang} code loads modules with unknown effects"))
        else:
            parts.append(ro())
    return worst(parts)


def raw_scan(text: str, *, loose: bool) -> Verdict | None:
    """The backstop where structure cannot be trusted: destructive or network verbs anywhere."""
    if _RAW_DESTRUCTIVE.search(text):
        return bad(note="a destructive command appears in text that may run")
    if loose and _RAW_NETWORK.search(text):
        return net("a network command appears in text that may run")
    return None


_PY_MODULES = {
    "http.server": net("python -m http.server serves files on the network"),
    "venv": mut("create", ("virtualenv",), reversible=True), "virtualenv": mut("create", ("virtualenv",), reversible=True),
    "json.tool": ro(), "site": ro(), "sysconfig": ro(), "platform": ro(), "this": ro(), "timeit": ro(), "tokenize": ro(),
    "py_compile": mut("write", ("bytecode",), reversible=True), "compileall": mut("write", ("bytecode",), reversible=True),
    "uvicorn": net("serves an application on the network"), "gunicorn": net("serves an application on the network"),
    "flask": net("serves an application on the network"), "mypy": ro(), "flake8": ro(), "pylint": ro(), "pyflakes": ro(),
}


def is_interpreter(name: str) -> bool:
    return bool(_PYTHON.match(name)) or name in _OTHER_INTERPRETERS


def interpreter_verdict(name: str, texts: list[str], heredocs: list[str]) -> Verdict:
    """``python -c``, ``node -e``, ``python -m``, a script, or code read from a here-document."""
    lang = "python" if _PYTHON.match(name) else name
    code_flags = {"python": ("-c",), "node": ("-e", "--eval", "-p", "--print"), "nodejs": ("-e", "--eval", "-p", "--print"),
                  "ruby": ("-e",), "perl": ("-e", "-E"), "php": ("-r",), "Rscript": ("-e",), "lua": ("-e",)}[lang]
    if lang == "perl" and any(re.match(r"^-(?![MIme])[a-zA-Z]*i", t) for t in texts):
        return mut("edit", [t for t in texts if not t.startswith("-")][1:], note="perl -i edits files in place")
    code = value_of(texts, code_flags)
    if code is not None:
        verdict = code_verdict(lang, code)
        if _READS_INPUT.search(code) and (_CODE_EVAL.search(code) or _EVAL_WORD.search(code)):
            # exec(sys.stdin.read()), eval <STDIN>: the code runs whatever is piped in, as `python -` does
            verdict = dataclasses.replace(worst([verdict, unknown(f"the {lang} code runs what it reads from its input")]),
                                          runs_stdin=True)
        return verdict
    if lang == "python" and "-m" in texts:
        index = texts.index("-m")
        module = texts[index + 1] if index + 1 < len(texts) else ""
        rest = texts[index + 2 :]
        if module in ("pip", "pip3"):
            return classify_program("pip", rest) or unknown()
        found = classify_program(module, rest) if module not in _PY_MODULES else _PY_MODULES[module]
        return found or unknown(f"python -m {module} runs that module")
    if any(t in ("-V", "--version", "-v", "--help", "-h") for t in texts) and len(texts) == 1:
        return ro()
    script = next((t for t in texts if not t.startswith("-")), None)
    if script is not None and script not in STDIN_NAMES:
        return runs_script(script, f"runs the {lang} script {script!r}")
    if heredocs:
        return worst([code_verdict(lang, body) for body in heredocs])
    return Verdict(UNKNOWN, False, notes=(f"{name} reading code from its input",), runs_stdin=True)
