"""Every test has a deadline, its teardown too: a hang is a named failure with a traceback, never a run past CI's limit.

pytest-timeout gives each test the ini default (``timeout`` in pyproject.toml) or its own
``@pytest.mark.timeout(N)``. Two gaps are closed here (a plugin the conftest loads):

- a test marked ``slow`` (whole runs, hubs, browsers, installs) without its own mark gets
  ``SLOW_TIMEOUT_S`` instead of the default;
- pytest-timeout stops its timer when a test fails (its ``pytest_exception_interact`` hook), so a
  fixture whose teardown hangs after a failure (an event loop whose task ignores cancellation, a
  server that never stops) hung the run: the teardown phase gets its own deadline, the test's.
"""

from __future__ import annotations

import pytest

SLOW_TIMEOUT_S = 1200.0  # a test marked slow: a whole run, a hub, a browser, an install on a busy machine


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """Teardown under a fresh timer of the test's own length (cancelled after, as pytest-timeout does)."""
    plugin = item.config.pluginmanager.get_plugin("timeout")
    settings = plugin._get_item_settings(item) if plugin is not None else None
    armed = settings is not None and settings.timeout is not None and settings.timeout > 0
    hook = item.config.pluginmanager.hook
    if armed:
        hook.pytest_timeout_cancel_timer(item=item)
        hook.pytest_timeout_set_timer(item=item, settings=settings)
    try:
        yield
    finally:
        if armed:
            hook.pytest_timeout_cancel_timer(item=item)
