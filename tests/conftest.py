import os
import sys
from pathlib import Path

import pytest

# Phase 1's output cache is the server user's and lasts across runs: a test (and a server or kernel
# it starts) generates fresh unless it points the cache at a folder of its own (test_phase1_cache).
os.environ["BESSER_PHASE1_CACHE"] = "off"

# Fixtures for the Jupyter server tests (jp_serverapp, jp_fetch, base url "/a%40b/"); the
# session's fresh install environments (install_fixtures: shared by every test that needs one);
# the deadlines of slow tests and of every teardown (timeouts).
pytest_plugins = ("pytest_jupyter.jupyter_server", "install_fixtures", "timeouts")

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A disposable project folder with one file."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("print('hello')\n")
    return root


@pytest.fixture
def fresh_secret_matchers():
    """Each test compiles its own secret matchers (``kernel_ext.secrets`` caches them per set of
    secrets): with a matcher cached by an earlier test, a test would never reach the matcher's
    construction, and its verdict (and mutmut's choice of tests for a mutant) would hang on order."""
    from kernel_ext.secrets import _matcher

    _matcher.cache_clear()
    yield
    _matcher.cache_clear()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("besser-agent", "long variants of the F11 suites")
    group.addoption("--soak", action="store_true", default=False,
                    help="fault/soak tests at full size (1,000 sandboxed commands, 100 background jobs)")
    group.addoption("--fuzz-long", action="store_true", default=False,
                    help="hypothesis fuzzing with many examples per tool (minutes, not seconds)")
