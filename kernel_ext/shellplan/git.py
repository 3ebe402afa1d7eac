"""``git`` judged per subcommand: ``status`` reads, ``commit`` mutates, ``push --force`` destroys.

Git's own history makes many changes reversible (the reflog keeps old commits), but anything
that drops uncommitted work or rewrites shared history is destructive: ``reset --hard``,
``clean -f`` (unless a checkpoint of this run covers it: ``deletion``), ``checkout -- <path>``,
``restore``, ``stash drop``, ``rebase``, forced or deleting pushes. A ``checkout`` of something
that looks like a path is treated as discarding changes.
"""

from __future__ import annotations

import re

from kernel_ext.shellplan.deletion import deletion
from kernel_ext.shellplan.reach import SEVERE_WRITE, UNPLACED, Reach, write_landing
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
    unknown,
    worst,
)

_GLOBAL_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env",
                            "--super-prefix"})
_READ = frozenset(
    ["status", "log", "diff", "show", "blame", "annotate", "describe", "shortlog", "grep", "rev-parse", "rev-list", "ls-files",
     "ls-tree", "cat-file", "show-ref", "for-each-ref", "whatchanged", "check-ignore", "check-attr", "count-objects", "version",
     "help", "var", "name-rev", "merge-base", "cherry", "range-diff", "show-branch", "verify-commit", "verify-tag", "fsck",
     "diff-tree", "diff-files", "diff-index"]
)
_MUTATE_REVERSIBLE = frozenset(["add", "commit", "mv", "init", "merge", "cherry-pick", "revert", "am", "apply", "notes", "bisect",
                                "sparse-checkout", "switch"])
_NETWORK = frozenset(["fetch", "pull", "clone", "ls-remote"])
_CLONE_VALUED = ("-b", "--branch", "-o", "--origin", "--depth", "-c", "--config", "--reference", "-u", "--upload-pack",
                 "--template", "--separate-git-dir", "-j", "--jobs", "--filter", "--shallow-since", "--shallow-exclude")


# Configuration keys whose value git runs as a command (or a folder it runs hooks from): given to
# one call by ``-c``/``--config-env``, a read-only-looking call runs it (``git -c core.fsmonitor=CMD
# status``); set by ``git config``, every later call may (a planted command). Over-flagging by design.
_COMMAND_KEY = re.compile(
    r"(?i)(?:core\.(?:fsmonitor|pager|editor|sshcommand|hookspath|askpass|gitproxy)|sequence\.editor|diff\.external"
    r"|diff\..+\.(?:command|textconv)|difftool\..+\.cmd|mergetool\..+\.cmd|merge\..+\.driver"
    r"|filter\..+\.(?:clean|smudge|process)|alias\..+|credential\.(?:.+\.)?helper|gpg\.(?:.+\.)?program|pager\..+"
    r"|uploadpack\.packobjectshook|protocol\..+\.allow|remote\..+\.(?:uploadpack|receivepack|vcs)|include\.path"
    r"|includeif\..+\.path|init\.templatedir)"
)
# Options of the read subcommands that run a command or write a file.
_RUNS_PAGER = frozenset({"-O", "--open-files-in-pager"})


def command_key(key: str) -> bool:
    """Whether git runs the value of configuration ``key`` as a command (or hooks from it)."""
    return _COMMAND_KEY.fullmatch(key.strip()) is not None


def classify_git(args: list[str], reach: Reach = UNPLACED) -> Verdict:
    """``git ARGS``; ``reach``: where it runs (``git -C DIR`` moves it) and the run's checkpoints."""
    i = 0
    keyed: list[str] = []  # command keys given to this call (``-c``, ``--config-env``)
    while i < len(args) and args[i].startswith("-"):
        if args[i] == "-C" and i + 1 < len(args):
            reach = reach.moved(args[i + 1])
        elif args[i] in ("--git-dir", "--work-tree") or args[i].startswith(("--git-dir=", "--work-tree=")):
            reach = reach.moved(None)  # the tree it cleans is elsewhere: not known
        elif (args[i] in ("-c", "--config-env") and i + 1 < len(args)) or args[i].startswith("--config-env="):
            setting = args[i].split("=", 1)[1] if args[i].startswith("--config-env=") else args[i + 1]
            if command_key(setting.split("=", 1)[0]):
                keyed.append(setting.split("=", 1)[0])
        i += 2 if args[i] in _GLOBAL_VALUED else 1
    if i >= len(args):
        return ro()
    verdict = _subcommand(args[i], args[i + 1 :], reach)
    if keyed:
        verdict = worst([verdict, unknown(f"git -c {keyed[0]}=...: git runs that value as a command")])
    return worst([verdict, _read_side_effects(args[i], args[i + 1 :])]) if args[i] in _READ else verdict


def _read_side_effects(sub: str, rest: list[str]) -> Verdict:
    """What a read subcommand's options do besides reading: run a pager command on files, an
    external diff from the configuration, or write a file (``--output``)."""
    parts: list[Verdict] = []
    if sub == "grep" and any(a in _RUNS_PAGER or a.startswith(("--open-files-in-pager", "-O")) for a in rest):
        parts.append(unknown("git grep -O runs a command on the matching files"))
    if "--ext-diff" in rest:
        parts.append(unknown("--ext-diff runs the external diff command the configuration names"))
    outputs = [a.split("=", 1)[1] for a in rest if a.startswith("--output=")]
    outputs += [rest[j + 1] for j, a in enumerate(rest[:-1]) if a == "--output"]
    if outputs:
        parts.append(bad("write", outputs, f"--output replaces {outputs[0]} with git's output"))
    return worst(parts) if parts else ro()


def _subcommand(sub: str, rest: list[str], reach: Reach) -> Verdict:
    if sub == "clean":
        return _clean(rest, reach)
    rule = _SPECIAL.get(sub)
    if rule is not None:
        return rule(rest)
    if sub in _READ:
        return ro()
    if sub == "clone":
        into = positional(rest, _CLONE_VALUED)[1:2]
        if into and write_landing(into[0], reach.cwd) in SEVERE_WRITE:
            return bad("write", into, f"git clone writes into {into[0]}, outside the workspace")
    if sub in _NETWORK:
        return net(f"git {sub} talks to a remote", "git", (sub,))
    if sub in _MUTATE_REVERSIBLE:
        return mut("git", (sub,), reversible=True)
    if sub in ("filter-branch", "filter-repo", "prune"):
        return bad("git", (sub,), f"git {sub} rewrites or deletes history")
    return unknown(f"git {sub}")


def _push(rest: list[str]) -> Verdict:
    words = positional(rest, ("-o", "--push-option", "--repo", "--receive-pack", "--exec"))
    forced = has(rest, "-f", "--force", "--force-with-lease", "--force-if-includes", "-d", "--delete", "--mirror", "--prune")
    if (forced or any(w.startswith(("+", ":")) for w in words[1:])
            or any(f.startswith("--force-with-lease") for f in long_flags(rest))):
        return bad("git", ("push",), "a forced or deleting push can destroy remote history")
    return net("git push publishes commits to a remote", "git", ("push",))


def _branch(rest: list[str]) -> Verdict:
    if has(rest, "-d", "-D", "--delete", "-f", "--force"):
        return bad("git", ("branch",), "deletes or overwrites a branch")
    if has(rest, "-m", "-M", "-c", "-C", "--move", "--copy", "-u", "--set-upstream-to", "--unset-upstream", "--edit-description"):
        return mut("git", ("branch",), reversible=True)
    listing = has(rest, "-a", "-r", "-l", "--list", "-v", "-vv", "--all", "--remotes", "--show-current", "--contains", "--merged",
                  "--no-merged")
    if positional(rest, ("--contains", "--merged", "--no-merged", "--sort", "--format", "--points-at")) and not listing:
        return mut("git", ("branch",), reversible=True)
    return ro()


def _tag(rest: list[str]) -> Verdict:
    if has(rest, "-d", "--delete", "-f", "--force"):
        return bad("git", ("tag",), "deletes or moves a tag")
    if (has(rest, "-l", "--list", "-n", "--contains", "--points-at")
            or not positional(rest, ("-m", "-F", "-u", "--sort", "--format"))):
        return ro()
    return mut("git", ("tag",), reversible=True)


def _remote(rest: list[str]) -> Verdict:
    sub = next(iter(positional(rest)), "")
    if sub in ("", "show", "get-url"):
        return ro()
    if sub in ("update", "prune"):
        return net(f"git remote {sub} talks to remotes")
    return mut("git", ("remote",), reversible=True)


def _config(rest: list[str]) -> Verdict:
    if has(rest, "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--show-origin", "--show-scope"):
        return ro()
    words = positional(rest, ("-f", "--file", "--blob", "--type", "--default"))
    if len(words) <= 1 and not has(rest, "--unset", "--unset-all", "--remove-section", "--rename-section", "--add", "-e",
                                   "--edit"):
        return ro()
    if words and command_key(words[0]) and not has(rest, "--unset", "--unset-all", "--remove-section"):
        return bad("git", ("config",), f"git config {words[0]} plants a command that later git calls run "
                   "(a read-only-looking git status or git diff then runs it)")
    return mut("git", ("config",), note="changes git configuration")


def _stash(rest: list[str]) -> Verdict:
    sub = next(iter(positional(rest)), "push")
    if sub in ("list", "show"):
        return ro()
    if sub in ("drop", "clear"):
        return bad("git", ("stash", sub), f"git stash {sub} discards stashed work")
    return mut("git", ("stash", sub), reversible=sub in ("push", "save", "branch", "create", "store"))


def _reset(rest: list[str]) -> Verdict:
    if has(rest, "--hard", "--merge", "--keep"):
        return bad("git", ("reset",), "git reset --hard discards uncommitted changes")
    return mut("git", ("reset",), reversible=True)


def _clean(rest: list[str], reach: Reach) -> Verdict:
    if has(rest, "-n", "--dry-run"):
        return ro()
    where = positional(rest, ("-e", "--exclude")) or ["."]
    return deletion(where, reach, f"git clean deletes untracked files under {', '.join(where)}", root=True)


def _checkout(rest: list[str]) -> Verdict:
    if has(rest, "-f", "--force", "--ours", "--theirs", "-p", "--patch", "--merge", "-m") or "--" in rest:
        return bad("git", ("checkout",), "discards working-tree changes")
    words = positional(rest, ("-b", "-B", "--orphan", "--track", "-t", "--conflict"))
    if has(rest, "-b", "-B", "--orphan"):
        return mut("git", ("checkout",), reversible=True)
    if len(words) > 1 or any(w == "." or "/" in w or "." in w or "*" in w for w in words):
        return bad("git", ("checkout",), "checking out a path discards its working-tree changes")
    return mut("git", ("checkout",), reversible=True)


def _switch(rest: list[str]) -> Verdict:
    if has(rest, "--discard-changes", "-f", "--force", "-C", "--force-create"):
        return bad("git", ("switch",), "discards working-tree changes or resets a branch")
    return mut("git", ("switch",), reversible=True)


def _restore(rest: list[str]) -> Verdict:
    if has(rest, "-S", "--staged") and not has(rest, "-W", "--worktree"):
        return mut("git", ("restore",), reversible=True)
    return bad("git", ("restore",), "git restore discards working-tree changes")


def _rm(rest: list[str]) -> Verdict:
    if has(rest, "--cached", "-n", "--dry-run"):
        return mut("git", ("rm",), reversible=True)
    return bad("delete", tuple(positional(rest)), "git rm deletes the files from the working tree")


def _rebase(rest: list[str]) -> Verdict:
    if has(rest, "--abort", "--quit"):
        return mut("git", ("rebase",), reversible=True)
    return bad("git", ("rebase",), "git rebase rewrites history")


def _reflog(rest: list[str]) -> Verdict:
    sub = next(iter(positional(rest)), "show")
    return bad("git", ("reflog", sub), "removes reflog entries") if sub in ("expire", "delete") else ro()


def _gc(rest: list[str]) -> Verdict:
    if any(f.startswith("--prune") for f in long_flags(rest)) and not any(a in ("--prune", "--no-prune") for a in rest):
        return bad("git", ("gc",), "prunes unreachable objects now")
    return mut("git", ("gc",), reversible=True)


def _update_ref(rest: list[str]) -> Verdict:
    return bad("git", ("update-ref",), "deletes a ref") if "d" in short_flags(rest) else mut("git", ("update-ref",))


def _worktree(rest: list[str]) -> Verdict:
    sub = next(iter(positional(rest)), "list")
    if sub == "list":
        return ro()
    if sub == "remove":
        return bad("git", ("worktree", *positional(rest)[1:]), "git worktree remove deletes the worktree's folder")
    if sub == "prune":
        return bad("git", ("worktree", sub), "removes a worktree with its changes")
    return mut("git", ("worktree", sub), reversible=True)


def _submodule(rest: list[str]) -> Verdict:
    sub = next(iter(positional(rest)), "status")
    if sub in ("status", "summary", "foreach"):
        return ro() if sub != "foreach" else unknown("git submodule foreach runs a command")
    if sub in ("update", "add", "sync"):
        return net("git submodule talks to remotes")
    if sub == "deinit":
        return bad("git", ("submodule", "deinit"), "removes submodule working trees")
    return mut("git", ("submodule", sub))


def _archive(rest: list[str]) -> Verdict:
    return mut("write", ("archive",), reversible=True) if has(rest, "-o", "--output") else ro()


def _commit(rest: list[str]) -> Verdict:
    return mut("git", ("commit",), reversible=True)


_SPECIAL = {
    "push": _push, "branch": _branch, "tag": _tag, "remote": _remote, "config": _config, "stash": _stash,
    "reset": _reset, "checkout": _checkout, "switch": _switch, "restore": _restore, "rm": _rm,
    "rebase": _rebase, "reflog": _reflog, "gc": _gc, "update-ref": _update_ref, "worktree": _worktree,
    "submodule": _submodule, "archive": _archive, "commit": _commit,
}
