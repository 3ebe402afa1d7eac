"""Temporary folders of hosted runs are gone when the runs end: finished, cancelled, many at once.

A real Jupyter server in its own process with a private ``TMPDIR`` (so other tests' folders do
not count). Six generate runs start over REST at once (BESSER's FastAPI generator, then Phase 3
in the sandboxed app host, shell tools on; no LLM provider is configured, so nothing is faked). One is
cancelled at once, two while app hosts are up (``besser-apphost-*`` folders exist), three
finish. Then no run's ``besser-apphost-*`` folder, and no other ``besser-*`` folder, is left in
the server's TMPDIR, while the server still runs; the one folder allowed is the server's ready
app host's (``apphost.ready``: started after a host's first job), and it holds nothing of a run. (The previous hosting code fails it: one
``besser-apphost-*`` folder stayed.) A fast test pins the two ways a folder outlived its run.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from server_process import start_server

RUNS = 6


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # shell tools on (the operator's switch), so each run also makes a sandbox home of its own
    process = start_server(tmp_path_factory.mktemp("tempdirs"), env={"BESSER_LLM_ENABLE_SHELL_TOOLS": "1"})
    try:
        yield process
    finally:
        process.stop()


def folders(server, prefix: str = "besser-") -> list[str]:
    return sorted(p.name for p in server.tmpdir.iterdir() if p.name.startswith(prefix))


async def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := await predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s")
        await asyncio.sleep(0.1)
    return value


@pytest.mark.slow
async def test_no_app_host_folder_outlives_its_run(server):
    from kernel_ext.model.examples import build_library_model
    from kernel_ext.model.jsonform import model_to_dict

    body = {"kind": "generate", "request": "A FastAPI backend", "model_json": model_to_dict(build_library_model()),
            "provider": "none", "target": "fastapi_backend"}
    seen_hosts: set[str] = set()
    async with server.api() as person:
        api = "/besser-agent/"
        started = await asyncio.gather(*(person.post(api + "runs", json=body) for _ in range(RUNS)))
        ids = [answer.json()["run"]["id"] for answer in started]
        assert (await person.post(api + f"runs/{ids[0]}/cancel", json={})).status_code == 200

        async def hosts_up():
            seen_hosts.update(folders(server))
            return folders(server, "besser-apphost-")

        await wait_until(hosts_up, 300, "no app host started")
        cancelled = [(await person.post(api + f"runs/{run_id}/cancel", json={})).status_code for run_id in ids[1:3]]

        async def all_ended():
            seen_hosts.update(folders(server))
            statuses = [(await person.get(api + f"runs/{run_id}")).json()["run"]["status"] for run_id in ids]
            return statuses if not {"queued", "running", "waiting_for_approval"} & set(statuses) else None

        statuses = await wait_until(all_ended, 900, "the runs did not end")
        assert statuses[0] == "cancelled" and statuses[3:] == ["completed"] * (RUNS - 3), statuses
        assert all(code in (200, 409) for code in cancelled)  # 409: it had already finished
        print("temporary folders seen:", sorted(seen_hosts))
        assert any(name.startswith("besser-apphost-") for name in seen_hosts), "no app host folder was ever made: the test proved nothing"
        assert any(name.startswith("besser-home-") for name in seen_hosts)  # the runs' sandbox homes
        # a host closes off the event loop just after its run's last event: give it a moment
        await wait_until(lambda: _empty(server), 30, f"left behind: {left_behind(server)}")
        assert (await person.get(api + "config")).status_code == 200


def left_behind(server) -> list[str]:
    """``besser-*`` folders but the server's one ready app host's, which has no source staged."""
    names = folders(server)
    ready = [n for n in names if n.startswith("besser-apphost-") and (server.tmpdir / n / "src").is_dir()
             and not any((server.tmpdir / n / "src").iterdir())]
    return [n for n in names if n not in ready[:1]]


async def _empty(server) -> bool:
    return not left_behind(server)


def test_a_closed_host_never_makes_its_folder_again():
    """The two ways a folder outlived its run: staging source into a host that was already
    closed (the folder was made again), and a late tool call of an ended run making a new host."""
    from kernel_ext.errors import ToolFailure
    from kernel_ext.tools.base import RunState
    from kernel_ext.validation.apphost.host import AppHost
    from kernel_ext.validation.hosting import app_host, close_app_hosts
    from kernel_ext.validation.staging import Backend, Source

    host = AppHost()
    host.close()
    assert not host.scratch.exists()
    with pytest.raises(ToolFailure, match="closed"):
        host.stage(Source(Backend(".", "main"), {"main.py": b"app = None\n"}, "0" * 64))
    assert not host.scratch.exists()

    state = RunState(run_id="20250101-000000-0a0b0c")
    made = app_host(state)
    assert close_app_hosts(state.run_id, state) == 1 and not made.scratch.exists()
    with pytest.raises(ToolFailure, match="has ended"):
        app_host(state)  # a worker thread still finishing the ended run's validation
    assert app_host(RunState(run_id=state.run_id)) is not made  # a new run of the same id is served
    close_app_hosts(state.run_id)


@pytest.mark.parametrize("sweep", [True, False])
def test_the_server_sweeps_stale_temporary_homes_at_start(tmp_path, sweep):
    """Homes a killed server left a day ago go at start (only with the prefixes, only stale ones); the traitlet turns it off."""
    import os

    tmpdir = tmp_path / "tmp"
    stale = [tmpdir / "besser-home-r1-abc", tmpdir / "besser-oneoff-home-x", tmpdir / "besser-apphost-y"]
    fresh, other = tmpdir / "besser-home-now", tmpdir / "someone-elses-old"
    for folder in (*stale, fresh, other):
        (folder / "inside").mkdir(parents=True)
    old = time.time() - 2 * 24 * 3600
    for folder in (*stale, other):
        os.utime(folder / "inside", (old, old))
        os.utime(folder, (old, old))
    process = start_server(tmp_path, args=() if sweep else ("--BesserAgentApp.sweep_temp_homes=False",))
    try:
        deadline = time.monotonic() + 20
        while sweep and any(f.exists() for f in stale) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(f.exists() != sweep for f in stale), process.log_tail()
        assert fresh.exists() and other.exists()
    finally:
        process.stop()
