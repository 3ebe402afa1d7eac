# ruff: noqa: F811 - the fixtures imported from appenv_fixtures are requested by name
"""The app-environment cache is the server's alone (``kernel_ext.appenv.cachedir``).

Someone who could write the cache plants a name in it: the lock file as a link to a host file,
an entry whose ``env.json`` or ``site/`` is a link or another user's, the cache folder itself a
link or writable by everyone. Each shape is refused by name or rebuilt safely: what a planted
link points to is unchanged on disk, and the app imports the package the sandbox built, never
the planted one (checked through the real app host for the ``site/`` shapes).
"""

from __future__ import annotations

import os
import stat

import pytest
from api_fixtures import call, executor_for, requires_sandbox
from appenv_fixtures import app_project, tree, wheelhouse  # noqa: F401 - fixtures by name

from kernel_ext.appenv.environment import environment_for
from kernel_ext.appenv.overlay import overlay_key
from kernel_ext.appenv.requirements import read_requirements
from kernel_ext.errors import ToolFailure
from kernel_ext.tools.base import RunState
from kernel_ext.validation.apphost.host import AppHost

REQUIREMENTS = "besser-demo-dep==1.2.0\n"
MANIFEST = '{"packages": [["besser-demo-dep", "1.2.0"]]}'
PLANTED_MODULE = "__version__ = 'planted'\n"
OTHER_UID = 65534  # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's file needs root")


def _key() -> str:
    return overlay_key(read_requirements(REQUIREMENTS).requirements)


def _planted_site(folder):
    (folder / "besser_demo_dep").mkdir(parents=True)
    (folder / "besser_demo_dep" / "__init__.py").write_text(PLANTED_MODULE)
    return folder


def _snapshot(path):
    """What must stay as it was: every file under ``path`` with its bytes, mode and mtime."""
    if path.is_file():
        st = path.stat()
        return {".": (path.read_bytes(), st.st_mode, st.st_mtime_ns)}
    return {p.relative_to(path).as_posix(): (p.read_bytes() if p.is_file() else None, p.lstat().st_mode,
                                             p.lstat().st_mtime_ns) for p in sorted(path.rglob("*"))}


def plant(shape, cache, outside):
    """Make ``shape`` in ``cache``; returns the outside path a planted link points to (or None)."""
    entry = cache / _key()
    cache.mkdir(mode=0o700)
    if shape == "lock links to a host file":
        outside.write_text("the host's file\n")
        (cache / f".{_key()}.lock").symlink_to(outside)
    elif shape == "lock links to a missing file":
        (cache / f".{_key()}.lock").symlink_to(outside)
    elif shape == "lock is another user's file" or shape == "lock is a folder":
        if shape == "lock is a folder":
            (cache / f".{_key()}.lock").mkdir()
        else:
            (cache / f".{_key()}.lock").write_text("")
            os.chown(cache / f".{_key()}.lock", OTHER_UID, OTHER_UID)
        return None
    elif shape == "env.json links to a host file":
        outside.write_text(MANIFEST)
        _planted_site(entry / "site")
        (entry / "env.json").symlink_to(outside)
    elif shape == "env.json is another user's":
        _planted_site(entry / "site")
        (entry / "env.json").write_text(MANIFEST)
        os.chown(entry / "env.json", OTHER_UID, OTHER_UID)
    elif shape == "site links to a planted folder":
        _planted_site(outside)
        entry.mkdir()
        (entry / "site").symlink_to(outside)
        (entry / "env.json").write_text(MANIFEST)
    elif shape == "site is another user's":
        _planted_site(entry / "site")
        (entry / "env.json").write_text(MANIFEST)
        os.chown(entry / "site", OTHER_UID, OTHER_UID)
    elif shape == "site is writable by others":
        _planted_site(entry / "site")
        (entry / "env.json").write_text(MANIFEST)
        os.chmod(entry / "site", 0o777)
    elif shape == "entry is writable by others":
        _planted_site(entry / "site")
        (entry / "env.json").write_text(MANIFEST)
        os.chmod(entry, 0o777)
    elif shape == "entry is readable by others":
        _planted_site(entry / "site")
        (entry / "env.json").write_text(MANIFEST)
        os.chmod(entry, 0o755)
    else:
        raise AssertionError(shape)
    return outside if outside.exists() or outside.is_symlink() else None


REBUILT = [
    "lock links to a host file",
    "lock links to a missing file",
    "lock is a folder",
    pytest.param("lock is another user's file", marks=as_root),
    "env.json links to a host file",
    pytest.param("env.json is another user's", marks=as_root),
    "site links to a planted folder",
    pytest.param("site is another user's", marks=as_root),
    "site is writable by others",
    "entry is writable by others",
    "entry is readable by others",
]


@requires_sandbox
@pytest.mark.parametrize("shape", REBUILT)
def test_a_planted_cache_entry_is_rebuilt_and_what_it_points_to_is_untouched(wheelhouse, tmp_path, shape):
    cache = tmp_path / "cache"
    outside = tmp_path / "outside"
    plant(shape, cache, outside)
    before = _snapshot(outside) if outside.exists() else None
    environment = environment_for(REQUIREMENTS)
    entry = cache / _key()
    assert environment.built_s is not None and environment.overlay == entry / "site"  # rebuilt, not reused
    assert not entry.is_symlink() and not (entry / "site").is_symlink() and not (entry / "env.json").is_symlink()
    assert (entry / "site" / "besser_demo_dep" / "__init__.py").read_text() == "__version__ = '1.2.0'\n"
    for checked in (entry, entry / "site", entry / "env.json", cache / f".{_key()}.lock"):
        st = checked.lstat()
        assert st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH), checked
    assert not entry.stat().st_mode & 0o077 and not cache.stat().st_mode & 0o077  # the cache and its entries: private
    if shape == "lock links to a missing file":
        assert not outside.exists() and not outside.is_symlink()  # never created through the link
    elif before is not None:
        assert _snapshot(outside) == before
    assert not [p.name for p in cache.iterdir() if p.name.startswith(".discard-")]  # what was set aside is gone


@requires_sandbox
@pytest.mark.parametrize("shape", ["site links to a planted folder", pytest.param("site is another user's", marks=as_root)])
def test_the_app_never_imports_a_planted_site(wheelhouse, tmp_path, shape):
    plant(shape, tmp_path / "cache", tmp_path / "outside")
    main = "from fastapi import FastAPI\nimport besser_demo_dep\n\napp = FastAPI()\n\n" \
           "@app.get('/v')\ndef v():\n    return {'dep': besser_demo_dep.__version__}\n"
    root = app_project(tmp_path / "project", "fastapi\n" + REQUIREMENTS, main)
    host = AppHost()
    try:
        result = call(executor_for(root, host, state=RunState(run_id="planted-site")), "test_api",
                      {"requests": [{"method": "GET", "path": "/v", "expected_status": 200,
                                     "expected_fields": {"dep": "1.2.0"}}]})
    finally:
        host.close()
    assert result.ok, result.observation
    assert "planted" not in str(result.data)


def _cache_as(shape, cache, outside):
    if shape == "a folder everyone can write":
        cache.mkdir()
        os.chmod(cache, 0o777)
    elif shape == "a folder writable by its group":
        cache.mkdir()
        os.chmod(cache, 0o770)
    elif shape == "a folder others can read":
        cache.mkdir()
        os.chmod(cache, 0o755)
    elif shape == "a folder its group can enter":
        cache.mkdir()
        os.chmod(cache, 0o710)
    elif shape == "a link to a folder":
        outside.mkdir()
        cache.symlink_to(outside)
    elif shape == "another user's folder":
        cache.mkdir(mode=0o755)
        os.chown(cache, OTHER_UID, OTHER_UID)
    elif shape == "a file":
        cache.write_text("not a folder\n")


@pytest.mark.parametrize("shape", ["a folder everyone can write", "a folder writable by its group", "a folder others can read",
                                   "a folder its group can enter", "a link to a folder",
                                   pytest.param("another user's folder", marks=as_root), "a file"])
def test_an_unsafe_cache_folder_is_refused_by_name_and_left_as_it_was(wheelhouse, tmp_path, shape):
    cache = tmp_path / "cache"
    outside = tmp_path / "outside"
    _cache_as(shape, cache, outside)
    before = (cache.lstat().st_mode, cache.lstat().st_uid, _snapshot(outside) if outside.exists() else None,
              sorted(os.listdir(cache)) if cache.is_dir() else cache.read_bytes())
    with pytest.raises(ToolFailure) as caught:
        environment_for(REQUIREMENTS)
    assert caught.value.code == "app_env_cache_unsafe"
    assert str(cache) in caught.value.message and "BESSER_APP_ENV_CACHE" in caught.value.message
    assert f"chmod 700 {cache}" in caught.value.message  # the one command that fixes it
    after = (cache.lstat().st_mode, cache.lstat().st_uid, _snapshot(outside) if outside.exists() else None,
             sorted(os.listdir(cache)) if cache.is_dir() else cache.read_bytes())
    assert after == before  # nothing made in it, nothing written through the link


@requires_sandbox
def test_an_unsafe_cache_is_one_named_finding_in_test_api(wheelhouse, tmp_path):
    _cache_as("a folder everyone can write", tmp_path / "cache", tmp_path / "outside")
    root = app_project(tmp_path / "project", "fastapi\n" + REQUIREMENTS)
    before = tree(root)
    host = AppHost()
    try:
        result = call(executor_for(root, host, state=RunState(run_id="unsafe-cache")), "test_api",
                      {"requests": [{"method": "GET", "path": "/versions", "expected_status": 200}]})
    finally:
        host.close()
    assert not result.ok and result.error_code == "app_env_cache_unsafe", result.observation
    assert "Traceback" not in result.observation and tree(root) == before
    assert os.listdir(tmp_path / "cache") == []


def test_a_new_cache_folder_is_made_private(wheelhouse, tmp_path):
    from kernel_ext.appenv.cachedir import open_cache

    cache = tmp_path / "deeper" / "cache"
    with open_cache(cache, create=True) as fd:
        assert fd is not None
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
