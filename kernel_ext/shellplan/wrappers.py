"""The programs that run another command (``sudo``, ``env``, ``timeout``, ``nice``, ``busybox`` ...):
``plan`` peels them off and judges the command they run, with the same reach and checkpoints, so a
deletion or a download fed to a shell reads the same with or without a wrapper in front.
"""

from __future__ import annotations

# wrapper -> (options taking a value, operands before the wrapped command)
WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset(["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group", "--host", "--prompt",
                        "--chdir"]), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "env": (frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "-n", "--class", "--classdata"}), 0),
    "nohup": (frozenset(), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "setsid": (frozenset(), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "command": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "builtin": (frozenset(), 0),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "flock": (frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}), 1),
    "unbuffer": (frozenset(), 0),
    "caffeinate": (frozenset(), 0),
    "strace": (frozenset(["-o", "-e", "-p", "-s", "-u", "-E", "-P", "-a", "-b", "-I", "-O", "-S", "-X"]), 0),
    "ltrace": (frozenset(["-o", "-e", "-p", "-s", "-u", "-n", "-l"]), 0),
    "valgrind": (frozenset(), 0),
    "xvfb-run": (frozenset({"-n", "-s", "-f", "-e", "-p", "--server-args"}), 0),
    "busybox": (frozenset(), 0),
    "toybox": (frozenset(), 0),
    "fakeroot": (frozenset({"-l", "--lib", "--faked", "-s", "-i", "-b"}), 0),
    "runuser": (frozenset({"-u", "--user", "-g", "--group", "-G", "--supp-group", "-s", "--shell", "-w",
                           "--whitelist-environment"}), 0),
    "chroot": (frozenset({"--userspec", "--groups"}), 1),
}
# wrappers whose option moves the command to another folder (``env -C DIR``, ``sudo -D DIR``)
CHDIR = {"env": ("-C", "--chdir"), "sudo": ("-D", "--chdir")}
