"""The Landlock tier's rule set as the launcher receives it (mutation testing found /proc and "listable" unpinned).

A Landlock sandbox reads the system folders and /proc, writes only the run's folders, and may
list (not read) the folders around what is hidden, such as /etc around /etc/shadow.
"""

from __future__ import annotations

from kernel_ext.sandbox.spec import Confinement, sensitive_paths
from kernel_ext.sandbox.tiers import landlock_rules


def test_the_rules_read_proc_list_around_hidden_files_and_write_only_the_run(tmp_path):
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    rules = landlock_rules(Confinement.for_run(ws, home, network=False))
    assert "/proc" in rules["read"] and "/usr" in rules["read"]
    assert "/etc" in rules["listable"] and "/etc" not in rules["read"]  # /etc holds shadow: listed, not read whole
    assert all(isinstance(p, str) and p.startswith("/") for p in rules["listable"])
    assert not {str(p) for p in sensitive_paths()} & set(rules["read"])
    assert rules["write"] == [str(ws), str(home)] and rules["devices"] == ["/dev"] and rules["deny_tcp"] is True
