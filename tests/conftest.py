import sys
from pathlib import Path

import pytest

# Fixtures for the Jupyter server tests (jp_serverapp, jp_fetch, base url "/a%40b/").
pytest_plugins = ("pytest_jupyter.jupyter_server",)

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A disposable project folder with one file."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("print('hello')\n")
    return root
