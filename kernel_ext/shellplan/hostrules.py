"""Programs that act outside the workspace by nature: the system's services, kernel settings and
scheduled jobs (destructive when they change them), and downloads (the files they write, so that
``plan`` knows when a later segment runs a file an earlier one downloaded)."""

from __future__ import annotations

from collections.abc import Callable

from kernel_ext.shellplan.verdict import Verdict, bad, has, net, positional, ro


def _crontab(args: list[str]) -> Verdict:
    if has(args, "-r"):
        return bad("delete", ["crontab"], "crontab -r removes every scheduled job")
    if has(args, "-l"):
        return ro()
    return bad("edit", ["crontab"], "crontab replaces the user's scheduled jobs, a system file outside the workspace")


def _systemctl(args: list[str]) -> Verdict:
    sub = next(iter(positional(args)), "")
    if sub.startswith(("status", "show", "list", "is-", "cat")) or not sub:
        return ro()
    return bad("service", positional(args)[1:], f"systemctl {sub} changes the system's services, outside the workspace")


def _service(args: list[str]) -> Verdict:
    words = positional(args)
    if has(args, "--status-all") or words[1:2] == ["status"]:
        return ro()
    return bad("service", words[:1], f"service {' '.join(words[:2])} changes the system's services, outside the workspace")


def _sysctl(args: list[str]) -> Verdict:
    if has(args, "-w", "--write", "-p", "--load", "--system") or any("=" in a for a in positional(args)):
        return bad("write", positional(args), "sysctl changes kernel settings, outside the workspace")
    return ro()


def _curl(args: list[str]) -> Verdict:
    out = _value_after_exact(args, ("-o", "--output"))
    remote = has(args, "-O", "--remote-name")
    return net("downloads or uploads over the network", "write" if out or remote else "",
               out or (_remote_names(positional(args, _CURL_VALUED)) if remote else []))


def _wget(args: list[str]) -> Verdict:
    out = _value_after_exact(args, ("-O", "--output-document"))
    return net("downloads over the network", "write", out or _remote_names(positional(args, ("-P", "-o", "-a", "-e")))
               or ["(downloaded file)"])


_CURL_VALUED = ("-o", "--output", "-H", "--header", "-d", "--data", "-u", "--user", "-X", "--request", "-A", "-e", "-x", "-T",
                "-F", "-b", "-c", "-m", "-w", "-r", "-K", "--retry", "--connect-timeout", "--max-time")


def _remote_names(urls: list[str]) -> list[str]:
    """The file a download keeps its remote name as (``curl -O``, ``wget URL``): the URL's last part."""
    return [name for url in urls if (name := url.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1])]


def _value_after_exact(args: list[str], names: tuple[str, ...]) -> list[str]:
    for i, arg in enumerate(args):
        if arg in names and i + 1 < len(args):
            return [args[i + 1]]
        for name in names:
            if name.startswith("--") and arg.startswith(name + "="):
                return [arg.split("=", 1)[1]]
    return []


HOST_RULES: dict[str, Callable[[list[str]], Verdict]] = {
    "crontab": _crontab, "systemctl": _systemctl, "service": _service, "sysctl": _sysctl, "curl": _curl, "wget": _wget,
}
