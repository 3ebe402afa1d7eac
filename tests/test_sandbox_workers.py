"""The warm worker: JSON frames over a confined process's pipes, a fresh process after a protocol failure.

A real bubblewrap sandbox runs a small echo program (the server's interpreter, ``-I``); the
worker's environment is the sandbox's one scrub plus the caller's explicit variables.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kernel_ext.sandbox import tiers
from kernel_ext.sandbox.frames import FrameError, encode, read_frame, split_frames, write_frame
from kernel_ext.sandbox.spec import Confinement
from kernel_ext.sandbox.workers import WarmWorker, WorkerGone, WorkerPlan

pytestmark = pytest.mark.skipif(
    tiers.self_test(tiers.Tier.BWRAP) is not None,
    reason=f"bubblewrap cannot start here: {tiers.self_test(tiers.Tier.BWRAP)}",
)

# Speaks the frame format by hand (4-byte big-endian length + JSON): the wire, not our module, is under test.
ECHO = r"""
import json, os, struct, sys
def read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data
def send(obj):
    body = json.dumps(obj).encode()
    os.write(1, struct.pack(">I", len(body)) + body)
while True:
    (length,) = struct.unpack(">I", read(4))
    message = json.loads(read(length))
    if message.get("op") == "garbage":
        os.write(1, b"\xff\xff\xff\xff")
    elif message.get("op") == "env":
        send({"names": sorted(os.environ)})
    else:
        send({"echo": message, "pid": os.getpid()})
"""

KEY = "sk-test-not-a-real-key-0123456789abcdef"


@pytest.fixture()
def worker(tmp_path: Path):
    for name in ("rw", "home"):
        (tmp_path / name).mkdir()

    def plan() -> WorkerPlan:
        conf = Confinement.for_run(tmp_path / "rw", tmp_path / "home", network=False)
        return WorkerPlan([sys.executable, "-I", "-c", ECHO], conf, {"BESSER_TEST_EXTRA": "1", "OPENAI_API_KEY": KEY})

    w = WarmWorker(plan, what="the echo worker", policy="bwrap")
    yield w
    w.stop()


def test_a_request_is_answered_and_a_protocol_failure_means_a_fresh_process(worker):
    assert worker.start() is True and worker.start() is False  # a live worker is reused
    first = worker.request({"n": 1}, 20)
    assert first["echo"] == {"n": 1} and worker.tier == "bwrap" and worker.network is False
    process = worker.process
    with pytest.raises(WorkerGone, match="pipe broke"):
        worker.request({"op": "garbage"}, 20)
    assert worker.process is None and process.poll() is not None  # stopped, its tree killed
    assert worker.start() is True and worker.starts == 2
    assert worker.request({"n": 2}, 20)["echo"] == {"n": 2}


def test_a_worker_that_died_is_reported_and_replaced(worker):
    worker.start()
    worker.request({"n": 1}, 20)
    os.kill(worker.process.pid, 9)
    with pytest.raises(WorkerGone, match="exit code"):
        worker.receive(20)
    assert not worker.alive
    assert worker.start() is True and worker.request({"n": 3}, 20)["echo"] == {"n": 3}


def test_the_environment_is_the_sandbox_scrub_plus_explicit_variables(worker, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    worker.start()
    names = worker.request({"op": "env"}, 20)["names"]
    assert "BESSER_TEST_EXTRA" in names and "HOME" in names
    assert "OPENAI_API_KEY" not in names and "ANTHROPIC_API_KEY" not in names


def test_frames_round_trip_and_refuse_what_is_not_a_frame(tmp_path):
    read_end, write_end = os.pipe()
    try:
        write_frame(write_end, {"text": "caf\u00e9", "lone": "\ud800"})  # a lone surrogate is escaped, not fatal
        assert read_frame(read_end) == {"text": "caf\u00e9", "lone": "\ud800"}
    finally:
        os.close(read_end)
        os.close(write_end)
    frames, rest = split_frames(encode({"a": 1}) + encode([2]) + b"\x00\x00")
    assert frames == [{"a": 1}, [2]] and rest == b"\x00\x00"
    with pytest.raises(FrameError):
        split_frames(b"\xff\xff\xff\xff")
