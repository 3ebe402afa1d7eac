"""What the app-environment tests share: a real FastAPI app, real wheels in a wheelhouse, the
operator's switches set per test, and a listing of the server's own packages to compare."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from wheel_factory import make_wheel

APP = '''from fastapi import FastAPI
import besser_demo_dep
import yaml

app = FastAPI()


@app.get("/versions")
def versions():
    return {"dep": besser_demo_dep.__version__, "yaml": yaml.__version__}
'''


def server_packages() -> dict[str, str]:
    return {d.metadata["Name"].lower(): d.version for d in importlib.metadata.distributions()}


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def wheelhouse(tmp_path, monkeypatch):
    house = tmp_path / "wheelhouse"
    make_wheel(house, "besser-demo-dep", "1.2.0")
    make_wheel(house, "PyYAML", "0.1", module="yaml")  # older than the server's: must not replace it
    monkeypatch.setenv("BESSER_APP_WHEELHOUSE", str(house))
    monkeypatch.setenv("BESSER_APP_ENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BESSER_APP_ENV_NETWORK", raising=False)
    return house


@pytest.fixture
def no_sources(tmp_path, monkeypatch):
    monkeypatch.delenv("BESSER_APP_WHEELHOUSE", raising=False)
    monkeypatch.delenv("BESSER_APP_ENV_NETWORK", raising=False)
    monkeypatch.setenv("BESSER_APP_ENV_CACHE", str(tmp_path / "cache"))


def app_project(root: Path, requirements: str, main: str = APP) -> Path:
    backend = root / "backend"
    backend.mkdir(parents=True)
    (backend / "main_api.py").write_text(main)
    (backend / "requirements.txt").write_text(requirements)
    return root


# -- reading and planning -------------------------------------------------------------------------
