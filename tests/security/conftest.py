"""Fixtures of the security suite (helpers live in ``world.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_ext.sandbox.registry import SessionRegistry

from .world import World, make_world


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


@pytest.fixture
def registry():
    found = SessionRegistry(max_sessions=10, idle_seconds=900)
    yield found
    found.close()
