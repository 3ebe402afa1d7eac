"""The sweep of temporary homes (issue 19, item 10): a home is judged by the newest change anywhere
in its tree, and never removed while the server that made it lives. Two real server-like
processes make their homes with ``make_temp_home`` (one stays alive, one has exited); the sweep runs
in this process, as another server's sweeper would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_ext.sandbox import tempsweep

REPO = Path(__file__).resolve().parents[1]
DAY = 24 * 3600
MAKE = ("import sys\nfrom kernel_ext.sandbox.tempsweep import make_temp_home\n"
        "home = make_temp_home(sys.argv[1], 'run1-', root=sys.argv[2])\n"
        "(home / 'deep' / 'er').mkdir(parents=True)\n(home / 'deep' / 'er' / 'state.txt').write_text('work')\n"
        "print(home, flush=True)\nsys.stdin.read()\n")  # lives until its stdin closes


def _age(root: Path, seconds: float) -> None:
    when = time.time() - seconds
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in dirs + files:
            os.utime(Path(folder) / name, (when, when), follow_symlinks=False)
    os.utime(root, (when, when))


def _server(prefix: str, root: Path) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen([sys.executable, "-c", MAKE, prefix, str(root)], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("prefix", tempsweep.PREFIXES)
def test_a_live_servers_home_stays_and_a_dead_ones_goes(tmp_path, prefix):
    live, live_home = _server(prefix, tmp_path)
    dead, dead_home = _server(prefix, tmp_path)
    try:
        dead.communicate("", timeout=60)  # this server has ended (reaped: its pid is gone)
        assert live_home.name.startswith(f"{prefix}o{live.pid}.") and dead_home.name.startswith(f"{prefix}o{dead.pid}.")
        for home in (live_home, dead_home):
            _age(home, DAY + 600)
        assert tempsweep.owner_alive(live_home.name) is True and tempsweep.owner_alive(dead_home.name) is False
        before = _tree(live_home)
        assert tempsweep.sweep(tmp_path) == [dead_home.name]
        assert not dead_home.exists() and _tree(live_home) == before  # the live server's home, untouched
    finally:
        live.communicate("", timeout=60)
    assert tempsweep.sweep(tmp_path) == [live_home.name]  # once that server has ended too
    assert os.listdir(tmp_path) == []


def test_age_is_the_newest_change_anywhere_in_the_tree(tmp_path):
    deep = tmp_path / "besser-home-deep"
    (deep / "a" / "b" / "c").mkdir(parents=True)
    (deep / "a" / "b" / "c" / "log.txt").write_text("still writing")
    _age(deep, DAY + 600)
    os.utime(deep / "a" / "b" / "c" / "log.txt")  # changed just now, three levels down
    old = tmp_path / "besser-oneoff-home-old"
    (old / "a" / "b").mkdir(parents=True)
    (old / "a" / "b" / "f").write_text("x")
    _age(old, DAY + 600)
    big = tmp_path / "besser-apphost-big"
    (big / "many").mkdir(parents=True)
    for i in range(12):
        (big / "many" / f"f{i}").write_text("x")
    _age(big, DAY + 600)
    removed = tempsweep.sweep(tmp_path, max_entries=10)  # past the walk's bound: not known to be stale, kept
    assert removed == ["besser-oneoff-home-old"]
    assert sorted(os.listdir(tmp_path)) == ["besser-apphost-big", "besser-home-deep"]
    assert (deep / "a" / "b" / "c" / "log.txt").read_text() == "still writing" and len(os.listdir(big / "many")) == 12


def test_make_home_names_only_known_kinds(tmp_path):
    with pytest.raises(ValueError):
        tempsweep.make_temp_home("elsewhere-", root=tmp_path)
    home = tempsweep.make_temp_home("besser-home-", "r1-", root=tmp_path)
    assert home.name.startswith(f"besser-home-o{os.getpid()}.") and tempsweep.owner_alive(home.name) is True
    assert tempsweep.owner_alive("besser-home-r1-abc") is None  # an old-style name: judged by age alone
