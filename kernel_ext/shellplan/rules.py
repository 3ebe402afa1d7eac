"""What one program invocation does, judged from its name and arguments alone.

Tables of known programs (read-only, network, destructive, mutating, project runners) and
argument-aware rules for the programs whose effect depends on flags (``cp``, ``sed -i``,
``tar x``, ``pip install``, ``rsync --delete``, formatters ...). When in doubt a rule picks the
worse class: over-flagging is a nuisance, under-flagging a hazard. Shell structure (segments,
wrappers, interpreters, ``find -exec``) lives in ``plan``, ``git`` in ``git``.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from kernel_ext.shellplan.deletion import delete_program, into_system
from kernel_ext.shellplan.hostrules import HOST_RULES
from kernel_ext.shellplan.reach import SEVERE_WRITE, UNPLACED, Reach, landing, literal_paths, resolve, worse_by_reach
from kernel_ext.shellplan.sedscript import sed_effects
from kernel_ext.shellplan.verdict import (
    Verdict,
    bad,
    has,
    long_flags,
    mut,
    net,
    positional,
    ro,
    short_flags,
    spelled_options,
    unknown,
    worst,
)

# -- program tables -------------------------------------------------------------------------------

READ_ONLY_PROGRAMS = frozenset(
    ["ls", "ll", "dir", "vdir", "cat", "tac", "head", "tail", "less", "more", "most", "grep", "egrep", "fgrep", "rg", "ag", "ack",
     "wc", "echo", "printf", "pwd", "whoami", "id", "groups", "date", "cal", "uname", "hostname", "which", "whereis", "type",
     "file", "stat", "du", "df", "tree", "cut", "tr", "diff", "cmp", "comm", "md5sum", "sha1sum", "sha224sum", "sha256sum",
     "sha384sum", "sha512sum", "cksum", "b2sum", "sum", "basename", "dirname", "realpath", "readlink", "true", "false", "test",
     "[", "[[", "sleep", "seq", "yes", "jq", "yq", "column", "nl", "od", "hexdump", "xxd", "strings", "ps", "pgrep", "pstree",
     "free", "uptime", "lsof", "ss", "netstat", "locale", "printenv", "cd", "pushd", "popd", "export", "unset", "set", "alias",
     "unalias", "history", "wait", "jobs", "shift", "read", "declare", "local", "typeset", "return", "exit", ":", "expr", "bc",
     "dc", "factor", "numfmt", "fold", "fmt", "pr", "paste", "join", "rev", "expand", "unexpand", "base64", "base32", "zcat",
     "bzcat", "xzcat", "zgrep", "zless", "lsblk", "getconf", "nproc", "arch", "tty", "man", "help", "info", "whatis", "apropos",
     "top", "htop", "vmstat", "iostat", "env", "mypy", "flake8", "pylint", "pyright", "pycodestyle", "pydocstyle", "bandit",
     "shellcheck", "hadolint", "yamllint", "cloc", "tokei", "wc", "file", "lscpu", "lsmod", "dmesg", "w", "who", "last", "users",
     "getent", "ulimit", "umask", "hash", "logname", "tput", "clear", "reset", "lsattr", "iconv", "look", "cmp", "sdiff",
     "vimdiff", "colordiff"]
)
NETWORK_PROGRAMS = frozenset(
    ["curl", "wget", "ssh", "scp", "sftp", "ftp", "lftp", "telnet", "nc", "ncat", "netcat", "socat", "ping", "ping6",
     "traceroute", "tracepath", "mtr", "dig", "nslookup", "host", "whois", "http", "https", "xh", "aria2c", "gh", "glab", "aws",
     "gcloud", "gsutil", "az", "kubectl", "helm", "apt", "apt-get", "aptitude", "yum", "dnf", "apk", "brew", "snap", "rustup",
     "nvm", "ngrok", "mosh", "rclone", "s3cmd", "npx", "pipx", "uvx", "bunx", "nmap", "ssh-copy-id", "git-lfs", "uvicorn",
     "gunicorn", "hypercorn", "daphne", "http-server", "serve", "live-server"]
)
DESTRUCTIVE_PROGRAMS = frozenset(
    ["rm", "shred", "unlink", "srm", "dd", "wipefs", "fdisk", "sfdisk", "cfdisk", "parted", "mkswap", "reboot", "shutdown",
     "halt", "poweroff", "rimraf"]
)
MUTATING_REVERSIBLE = frozenset(["mkdir", "touch", "mktemp", "rmdir", "mkfifo"])
MUTATING_PROGRAMS = frozenset(
    ["chmod", "chown", "chgrp", "chattr", "setfacl", "install", "patch", "kill", "pkill", "killall",
     "useradd", "userdel", "usermod", "groupadd", "passwd", "chsh", "timedatectl", "hostnamectl", "update-alternatives",
     "ldconfig", "ctags", "etags"]
)
INTERACTIVE = frozenset(["vim", "vi", "nvim", "nano", "emacs", "pico", "ed", "less", "more", "most", "top", "htop", "man",
                         "watch", "tmux", "screen"])
# Test runners and build tools run project code: what they do depends on that code.
RUNS_PROJECT_CODE = frozenset(
    ["make", "cmake", "ninja", "meson", "bazel", "gradle", "mvn", "ant", "pytest", "py.test", "tox", "nox", "jest", "vitest",
     "mocha", "karma", "ava", "cypress", "playwright", "ctest", "rake", "bundle", "composer", "alembic", "manage.py",
     "django-admin", "flask", "fastapi", "celery", "sqlite3", "psql", "mysql", "mongo", "mongosh", "redis-cli"]
)


def classify_program(name: str, args: list[str], reach: Reach = UNPLACED) -> Verdict | None:
    """Verdict for a known program, or None when the name is not in any table (``reach``: where it
    lands). A write into a system path is destructive whatever the program (``deletion.into_system``)."""
    worse = worse_by_reach(name, args, reach) or delete_program(name, args, reach)
    if worse is not None:
        return worse
    found = _by_table(name, args)
    return into_system(name, found, reach, args) if found is not None else None


def _by_table(name: str, args: list[str]) -> Verdict | None:
    rule = _RULES.get(name)
    if rule is not None:
        return rule(args)
    if name.startswith("mkfs"):
        return bad("format", positional(args), "formats a filesystem")
    if name in DESTRUCTIVE_PROGRAMS:
        return bad("delete", positional(args), f"{name} destroys data irreversibly")
    if name in NETWORK_PROGRAMS:
        return net(f"{name} talks to the network")
    if name in MUTATING_REVERSIBLE:
        return mut("create" if name != "rmdir" else "delete", positional(args), reversible=True)
    if name in MUTATING_PROGRAMS:
        return mut(name, positional(args))
    if name in READ_ONLY_PROGRAMS:
        return ro(f"{name} is interactive; sh_run gives it no terminal" if name in INTERACTIVE else "")
    if name in RUNS_PROJECT_CODE:
        if name == "make" and has(args, "-n", "--dry-run", "--just-print"):
            return ro()
        return unknown(f"{name} runs project code: its effects depend on that code")
    if name in INTERACTIVE:
        return mut("edit", positional(args), note=f"{name} is interactive; sh_run gives it no terminal")
    return None


# -- per-program rules ----------------------------------------------------------------------------


def _cp(args: list[str]) -> Verdict:
    target = _target(args)
    return mut("copy", target, note="overwrites an existing target without asking")


def _mv(args: list[str]) -> Verdict:
    return mut("move", positional(args, ("-t", "-S", "--suffix", "--target-directory")),
               note="overwrites an existing target without asking")


def _ln(args: list[str]) -> Verdict:
    if has(args, "-f", "--force"):
        return bad("replace", _target(args), "ln -f removes existing targets")
    return mut("link", _target(args), reversible=True)


def _target(args: list[str]) -> list[str]:
    values = ("-t", "--target-directory", "-S", "--suffix")
    for i, arg in enumerate(args):
        if arg in ("-t", "--target-directory") and i + 1 < len(args):
            return [args[i + 1]]
        if arg.startswith("--target-directory="):
            return [arg.split("=", 1)[1]]
    words = positional(args, values)
    return words[-1:] if len(words) > 1 else words


def _truncate(args: list[str]) -> Verdict:
    for i, arg in enumerate(args):
        size = args[i + 1] if arg == "-s" and i + 1 < len(args) else arg.split("=", 1)[1] if arg.startswith("--size=") else None
        if size is not None and size.startswith("+"):
            return mut("grow", positional(args, ("-s", "-r")), reversible=True)
    return bad("truncate", positional(args, ("-s", "-r")), "truncate cuts file contents")


def _sed(args: list[str]) -> Verdict:
    parts: list[Verdict] = []
    if "i" in short_flags(args) or "--in-place" in long_flags(args):
        files = positional(args, ("-e", "-f", "-l", "--expression", "--file"))
        parts.append(mut("edit", files[1:] if not has(args, "-e", "--expression", "-f", "--file") else files))
    effects = sed_effects(args)
    if effects.writes:
        parts.append(bad("write", effects.writes, f"the sed script's w command replaces {effects.writes[0]} (truncated first)"))
    if effects.runs:
        parts.append(unknown("the sed script's e command runs a shell command"))
    if effects.unsure:
        parts.append(unknown(effects.unsure))
    return worst(parts) if parts else ro()


def _awk(args: list[str]) -> Verdict:
    if "inplace" in args:
        return mut("edit", positional(args, ("-i", "-f", "-v", "-F"))[1:])
    program = next(iter(positional(args, ("-f", "-v", "-F", "-i"))), "")
    if "-f" in args or any(token in program for token in ("system", "|", ">", "getline")):
        severe = [p for p in literal_paths(program) if landing(resolve(p, None)) in SEVERE_WRITE] if ">" in program else []
        if severe:
            return bad("write", severe, f"the awk program writes into {', '.join(severe)}, outside the workspace")
        return unknown("awk program may run commands or write files")
    return ro()


# Options that hand the program a command of its own to run: the command is a shell line the plan
# cannot read, so the call is at least ``unknown`` whatever else it does (red team 2).
_SORT_RUNS = ("--compress-program",)
_TAR_RUNS = ("--checkpoint-action", "--to-command", "--use-compress-program", "--info-script",
             "--new-volume-script", "--rsh-command", "--rmt-command")


def _runs_a_command(program: str, args: list[str], names: tuple[str, ...], letters: AbstractSet[str] = frozenset()) -> Verdict | None:
    spelled = spelled_options(args, names)
    if spelled or letters:
        given = ", ".join(spelled + [f"-{letter}" for letter in sorted(letters)])
        return unknown(f"{program} {given} runs a command of its own")
    return None


def _sort(args: list[str]) -> Verdict:
    if runs := _runs_a_command("sort", args, _SORT_RUNS):
        return runs
    for i, arg in enumerate(args):
        if arg in ("-o",) and i + 1 < len(args):
            return mut("write", [args[i + 1]])
        if arg.startswith("--output") or (arg.startswith("-o") and len(arg) > 2):
            return mut("write", [arg.split("=", 1)[-1] if "=" in arg else arg[2:]])
    return ro()


def _uniq(args: list[str]) -> Verdict:
    files = positional(args, ("-f", "-s", "-w"))
    return mut("write", files[1:2]) if len(files) > 1 else ro()


def _tee(args: list[str]) -> Verdict:
    files = [f for f in positional(args) if landing(f) != "neutral"]  # tee /dev/null: a pipe's copy thrown away
    if not files:
        return ro()
    return mut("append" if has(args, "-a", "--append") else "write", files)


def _tar(args: list[str]) -> Verdict:
    first = args[0] if args else ""
    letters = set(first) if first and not first.startswith("-") else short_flags(args)
    longs = long_flags(args)
    files = _value_after(args, ("-f", "--file"))
    if runs := _runs_a_command("tar", args, _TAR_RUNS, letters & {"I", "F"}):
        return runs
    if "--delete" in longs:
        return bad("delete", files, "tar --delete removes archive members")
    if "x" in letters or "--extract" in longs or "--get" in longs:
        return mut("extract", files, note="extracting overwrites existing files")
    if letters & {"c", "r", "u", "A"} or longs & {"--create", "--append", "--update", "--concatenate"}:
        return mut("write", files, reversible=True)
    if "t" in letters or "--list" in longs:
        return ro()
    return unknown("tar without a recognised mode")


def _value_after(args: list[str], names: tuple[str, ...]) -> list[str]:
    for i, arg in enumerate(args):
        if arg in names and i + 1 < len(args):
            return [args[i + 1]]
        if arg.startswith("-") and not arg.startswith("--") and "f" in arg[1:] and i + 1 < len(args):
            return [args[i + 1]]
    return []


def _unzip(args: list[str]) -> Verdict:
    if has(args, "-l", "-t", "-v", "-Z", "-z"):
        return ro()
    if has(args, "-o"):
        return bad("extract", positional(args, ("-d", "-x"))[:1], "unzip -o overwrites files without asking")
    return mut("extract", positional(args, ("-d", "-x"))[:1])


def _zip(args: list[str]) -> Verdict:
    if has(args, "-m", "--move"):
        return bad("move", positional(args), "zip -m deletes the originals")
    return mut("write", positional(args)[:1], reversible=True)


def _compress(args: list[str]) -> Verdict:
    if has(args, "-c", "--stdout", "-l", "--list", "-t", "--test"):
        return ro()
    return mut("compress", positional(args), reversible=True, note="replaces each file with its (de)compressed form")


def _pip(args: list[str]) -> Verdict:
    sub = next(iter(positional(args, ("-r", "-c", "-e", "--index-url", "-i", "--target", "-t", "--prefix"))), "")
    if sub in ("install", "download", "wheel", "index", "search"):
        return net("installs packages from an index", "install", positional(args)[1:])
    if sub == "uninstall":
        return mut("uninstall", positional(args)[1:])
    if (sub in ("list", "show", "freeze", "check", "help", "debug", "inspect", "hash", "cache", "config")
            or has(args, "-V", "--version") or not sub):
        return ro()
    return unknown(f"pip {sub}")


_NPM_NETWORK = frozenset(["install", "i", "ci", "add", "update", "up", "upgrade", "publish", "audit", "outdated", "view", "info",
                          "v", "show", "dlx", "create", "exec", "x", "fetch", "pack", "link"])
_NPM_READ = frozenset(["ls", "list", "ll", "la", "config", "get", "prefix", "root", "bin", "help", "version", "-v", "--version",
                       "whoami", "doctor", "why", "explain"])


def _npm(args: list[str]) -> Verdict:
    sub = next(iter(positional(args, ("--prefix", "-C", "--workspace", "-w"))), "")
    if not sub:
        return ro() if has(args, "-v", "--version", "-h", "--help") else net("installs packages (yarn with no command)")
    if sub in _NPM_NETWORK:
        return net(f"{sub} talks to the package registry", "install" if sub in ("install", "i", "ci", "add") else "")
    if sub in ("uninstall", "remove", "rm", "un", "r", "prune", "dedupe"):
        return mut("uninstall", positional(args)[1:])
    if sub == "init":
        return mut("create", ["package.json"], reversible=True)
    if sub in _NPM_READ:
        return ro()
    return unknown(f"{sub} runs a project script")


def _uv(args: list[str]) -> Verdict:
    sub = next(iter(positional(args)), "")
    if sub == "pip":
        return _pip(args[args.index("pip") + 1 :])
    if sub in ("sync", "add", "lock", "tool", "python", "publish", "remove", "export", "install", "update"):
        return net(f"{sub} talks to the package index")
    if sub in ("venv", "init", "create"):
        return mut("create", positional(args)[1:], reversible=True)
    if sub == "run":
        return unknown("uv run runs project code")
    return ro() if sub in ("version", "help", "tree") or not sub else unknown(f"uv {sub}")


def _cargo_go(args: list[str]) -> Verdict:
    sub = next(iter(positional(args)), "")
    if sub in ("install", "fetch", "update", "add", "publish", "get", "search", "login"):
        return net(f"{sub} talks to the package registry")
    if sub == "mod":
        words = positional(args)
        return net("go mod fetches modules") if words[1:2] in (["download"], ["tidy"], ["vendor"]) else mut("edit", ["go.mod"])
    if sub in ("fmt",):
        return mut("format", positional(args)[1:], reversible=False)
    if sub in ("clean",):
        return mut("delete", ["build output"], note="removes build output (rebuildable)")
    if sub in ("version", "env", "help", "doc", "tree", "metadata", "list", "vet", "check", "clippy", "search") or not sub:
        return ro() if sub not in ("check", "clippy", "vet") else unknown(f"{sub} builds the project")
    return unknown(f"{sub} runs or builds project code")


def _docker(args: list[str]) -> Verdict:
    words = positional(args, ("-H", "--host", "--context", "-c", "--config", "-f", "--file", "-p", "--project-name"))
    grouped = words[:1] in (["compose"], ["system"], ["volume"], ["image"], ["container"], ["network"])
    sub = " ".join(words[:2]) if grouped else (words[0] if words else "")
    if any(word in sub for word in ("rm", "rmi", "prune", "kill", "down", "stop")):
        return bad("delete", words[1:], "removes containers, images or volumes")
    if sub.split(" ")[-1] in ("ps", "images", "inspect", "logs", "version", "info", "ls", "top", "stats", "port", "history", "df",
                              "config"):
        return ro()
    if sub.split(" ")[-1] in ("exec", "cp"):
        return unknown("runs inside a container")
    return net("pulls images or runs containers")


def _kill(args: list[str]) -> Verdict:
    if "-1" in positional(args, ("-s", "-n")) or any(a in ("-1",) for a in args[1:]):
        return bad("kill", ["every process"], "kill -1 signals every process you own")
    return mut("kill", positional(args, ("-s", "-n")))


def _kill_by_name(args: list[str]) -> Verdict:
    return bad("kill", positional(args), "kills every process matching a name or pattern, the session's and its servers' too")


def _rsync(args: list[str]) -> Verdict:
    words = positional(args, ("-e", "--rsh", "--exclude", "--include", "--filter", "-f"))
    if has(args, "--delete", "--delete-before", "--delete-after", "--delete-during", "--delete-excluded",
           "--remove-source-files"):
        return bad("sync", words[-1:], "rsync --delete removes files missing from the source")
    if any(":" in w or w.startswith("rsync://") for w in words):
        return net("rsync to or from another host", "sync", words[-1:])
    return mut("sync", words[-1:], note="overwrites existing targets")


def _formatter(check_flags: tuple[str, ...], write_flags: tuple[str, ...] = (), writes_by_default: bool = True):
    def rule(args: list[str]) -> Verdict:
        if check_flags and has(args, *check_flags):
            return ro()
        if write_flags and has(args, *write_flags):
            return mut("format", positional(args))
        return mut("format", positional(args)) if writes_by_default else ro()

    return rule


def _ruff(args: list[str]) -> Verdict:
    sub = next(iter(positional(args)), "")
    if sub == "format":
        return ro() if has(args, "--check", "--diff") else mut("format", positional(args)[1:])
    if has(args, "--fix", "--unsafe-fixes") and not has(args, "--diff"):
        return mut("fix", positional(args)[1:])
    return ro()


def _tsc(args: list[str]) -> Verdict:
    return ro() if has(args, "--noEmit", "-v", "--version", "--help") else mut("write", ["compiled output"], reversible=True)


_RULES = {
    "cp": _cp, "mv": _mv, "ln": _ln, "truncate": _truncate, "sed": _sed, "gsed": _sed,
    "awk": _awk, "gawk": _awk, "mawk": _awk, "nawk": _awk, "sort": _sort, "uniq": _uniq, "tee": _tee,
    "tar": _tar, "unzip": _unzip, "zip": _zip,
    "gzip": _compress, "gunzip": _compress, "bzip2": _compress, "bunzip2": _compress, "xz": _compress,
    "unxz": _compress, "zstd": _compress, "unzstd": _compress, "lz4": _compress,
    "pip": _pip, "pip3": _pip, "npm": _npm, "pnpm": _npm, "yarn": _npm, "bun": _npm, "uv": _uv,
    "cargo": _cargo_go, "go": _cargo_go, "poetry": _uv, "pipenv": _uv, "conda": _uv, "mamba": _uv,
    "docker": _docker, "podman": _docker, "kill": _kill, "pkill": _kill_by_name, "killall": _kill_by_name,
    "rsync": _rsync, **HOST_RULES,
    "black": _formatter(("--check", "--diff")), "isort": _formatter(("--check", "--check-only", "--diff")),
    "autopep8": _formatter((), ("-i", "--in-place"), False), "yapf": _formatter((), ("-i", "--in-place"), False),
    "prettier": _formatter((), ("--write", "-w"), False), "eslint": _formatter((), ("--fix",), False),
    "gofmt": _formatter((), ("-w",), False), "clang-format": _formatter((), ("-i",), False),
    "rustfmt": _formatter(("--check",)), "ruff": _ruff, "tsc": _tsc,
}
