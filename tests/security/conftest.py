"""Fixtures of the security suite (helpers live in ``world.py``)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from kernel_ext.sandbox.session.registry import SessionRegistry

from .world import World, make_world


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


@pytest.fixture
def registry():
    found = SessionRegistry(max_sessions=10, idle_seconds=900)
    yield found
    found.close()


@pytest.fixture
def frozen_heap():
    """The test process's own heap (pytest, every test module, the server) is frozen first, as a
    long-running server's start-up heap would be (``gc.freeze``): a full collection then costs
    what the run allocated, not what pytest imported. Pauses the load's own objects cause are
    still measured."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()
