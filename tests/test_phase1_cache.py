"""Phase 1's output cache (``generation/outputcache.py``): a hit only on the whole key (the model's
digest, three kinds of model change among it, the generator, its options, BESSER's version, the
project's version, the method-bodies mode, the code shaping the output), a damaged or planted entry
rebuilt (never read through a link: the entry, its manifest, its files folder, a folder or a file
inside, each a link to a copy that would read as a valid hit if followed), a planted lock replaced,
runs with one key taking turns. Real files on disk, the real generator."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

from kernel_ext.generation import run_phase1
from kernel_ext.generation.manifest import GenerationLedger
from kernel_ext.generation.outputcache import cacheable
from kernel_ext.generation.targets import BESSER_TARGETS
from kernel_ext.model import build_library_model

GENERATOR = "pydantic"  # in-process and quick; the key does not depend on which generator it is


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "phase1-cache"
    monkeypatch.setenv("BESSER_PHASE1_CACHE", str(folder))
    return folder


def _run(out: Path, model=None, generator: str = GENERATOR, options=None, **kw):
    ledger = GenerationLedger()
    result = run_phase1(model or build_library_model(), out, generator, options, ledger=ledger, **kw)
    return result, ledger


def _entry(cache: Path) -> Path:
    (entry,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    return entry


def test_a_hit_publishes_records_and_reports_as_a_fresh_generation(cache, tmp_path):
    fresh, fresh_ledger = _run(tmp_path / "a", generator="fastapi_backend")
    reused, reused_ledger = _run(tmp_path / "b", generator="fastapi_backend")
    assert not fresh.reused_from_cache and reused.reused_from_cache
    assert reused_ledger.files == fresh_ledger.files  # the authorship split's ledger: exactly a fresh one's
    assert reused_ledger.runs == [{**fresh_ledger.runs[0], "reused_from_cache": True}]
    assert reused.to_dict()["files"] == fresh.to_dict()["files"]
    assert reused.checks.app_import == fresh.checks.app_import and reused.checks.findings == fresh.checks.findings
    assert "Phase 1 output reused from cache" in reused.notes
    for f in reused.files:
        assert (tmp_path / "b" / f.path).read_bytes() == (tmp_path / "a" / f.path).read_bytes()
    assert os.stat(cache).st_mode & 0o777 == 0o700


def _other_model():
    from besser.BUML.metamodel.structural import Property, StringType

    model = build_library_model()
    book = next(c for c in model.get_classes() if c.name == "Book")
    book.attributes = {*book.attributes, Property(name="subtitle", type=StringType)}
    return model


def _changed_model(change) -> object:
    model = build_library_model()
    change(model)
    return model


def _method_body(model) -> None:
    book = next(c for c in model.get_classes() if c.name == "Book")
    method = next(m for m in book.methods if m.name == "is_long")
    assert "> threshold" in method.code
    method.code = method.code.replace("> threshold", ">= threshold")


def _association_end(model) -> None:
    end = next(e for a in model.associations for e in a.ends if e.name == "borrower")
    assert (end.multiplicity.min, end.multiplicity.max) == (0, 1)
    end.multiplicity = type(end.multiplicity)(1, 1)


def _enumeration_literal(model) -> None:
    from besser.BUML.metamodel.structural import EnumerationLiteral

    genre = next(t for t in model.get_enumerations() if t.name == "Genre")
    genre.literals = {*genre.literals, EnumerationLiteral(name="DRAMA")}


CHANGES = {
    "model": lambda mp: {"model": _other_model()},
    "model: a method's body": lambda mp: {"model": _changed_model(_method_body)},
    "model: an association end's multiplicity": lambda mp: {"model": _changed_model(_association_end)},
    "model: an enumeration's literals": lambda mp: {"model": _changed_model(_enumeration_literal)},
    "generator options": lambda mp: {"options": {"backend": True}},
    "generator": lambda mp: {"generator": "sqlalchemy"},
    "BESSER's version": lambda mp: mp.setattr("kernel_ext.generation.phase1.besser_version", lambda: "0.0.0-other"),
    "the project's version": lambda mp: mp.setattr("kernel_ext.version.__version__", "0.0.0-other"),
    "method bodies mode": lambda mp: mp.setenv("BESSER_MODEL_METHOD_BODIES", "off"),
    "the code shaping the output": lambda mp: mp.setattr("kernel_ext.generation.outputcache._shaping_digest", lambda: "other"),
}


@pytest.mark.parametrize("part", sorted(CHANGES))
def test_a_hit_needs_every_part_of_the_key(cache, tmp_path, monkeypatch, part):
    first, _ = _run(tmp_path / "a")
    again, _ = _run(tmp_path / "b")
    assert not first.reused_from_cache and again.reused_from_cache
    with monkeypatch.context() as mp:
        changed = CHANGES[part](mp) or {}
        other, _ = _run(tmp_path / "c", **changed)
        assert not other.reused_from_cache, f"a change of {part} still hit the cache"
    back, _ = _run(tmp_path / "d")
    assert back.reused_from_cache  # the original key's entry is still there


def _plant_link_entry(entry: Path, outside: Path) -> None:
    shutil.copytree(entry, outside)
    shutil.rmtree(entry)
    entry.symlink_to(outside)


def _plant_link_file(entry: Path, outside: Path) -> None:
    target = next(p for p in (entry / "files").rglob("*") if p.is_file())
    outside.mkdir()
    (outside / "copy").write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(outside / "copy")


def _changed_file(entry: Path, outside: Path) -> None:
    target = next(p for p in (entry / "files").rglob("*.py"))
    data = bytearray(target.read_bytes())
    data[-2] = ord("#") if data[-2] != ord("#") else ord(" ")
    target.write_bytes(bytes(data))


def _missing_file(entry: Path, outside: Path) -> None:
    next(p for p in (entry / "files").rglob("*") if p.is_file()).unlink()


def _group_writable(entry: Path, outside: Path) -> None:
    os.chmod(entry, 0o770)


def _group_writable_file(entry: Path, outside: Path) -> None:
    os.chmod(next(p for p in (entry / "files").rglob("*") if p.is_file()), 0o660)


def _another_users(entry: Path, outside: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing an entry's owner needs root")
    os.chown(entry / "entry.json", 4242, 4242)


def _plant_link_manifest(entry: Path, outside: Path) -> None:
    outside.mkdir()
    (outside / "entry.json").write_bytes((entry / "entry.json").read_bytes())
    (entry / "entry.json").unlink()
    (entry / "entry.json").symlink_to(outside / "entry.json")


def _plant_link_files(entry: Path, outside: Path) -> None:
    shutil.copytree(entry / "files", outside)
    shutil.rmtree(entry / "files")
    (entry / "files").symlink_to(outside)


def _plant_link_folder(entry: Path, outside: Path) -> None:
    inner = next(p for p in (entry / "files").iterdir() if p.is_dir())  # the generator's own folder
    shutil.copytree(inner, outside)
    shutil.rmtree(inner)
    inner.symlink_to(outside)


def _extra_file(entry: Path, outside: Path) -> None:
    (entry / "files" / "planted.py").write_text("import os\n")


def _fifo_file(entry: Path, outside: Path) -> None:
    target = next(p for p in (entry / "files").rglob("*.py"))
    target.unlink()
    os.mkfifo(target, 0o600)  # opened for reading with no writer, it would hang the run


def _another_users_file(entry: Path, outside: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    os.chown(next(p for p in (entry / "files").rglob("*") if p.is_file()), 4242, 4242)


def _manifest_edit(change):
    """Rewrite the entry's manifest with ``change`` applied (its files untouched, each still its hash)."""
    def damage(entry: Path, outside: Path) -> None:
        manifest = json.loads((entry / "entry.json").read_text())
        change(manifest)
        (entry / "entry.json").write_text(json.dumps(manifest))
    return damage


MANIFEST_DAMAGE = {
    "checks is a list": lambda m: m.update(checks=[]),
    "checks is a string": lambda m: m.update(checks="x"),
    "a check report is a string": lambda m: m.update(checks={"k": "x"}),
    "a file's size is infinite": lambda m: m["files"][0].__setitem__(2, float("inf")),
    "a file's size is a float": lambda m: m["files"][0].__setitem__(2, float(m["files"][0][2])),
    "a file's size is negative": lambda m: m["files"][0].__setitem__(2, -1),
    "a file row is short": lambda m: m["files"][0].pop(),
    "files is a mapping": lambda m: m.update(files={"a": 1}),
    "bytes is infinite": lambda m: m.update(bytes=float("inf")),
    "the manifest is a list": lambda m: (m.clear(), m.update(files=None)),
}


DAMAGE = {**{f"manifest: {name}": _manifest_edit(change) for name, change in MANIFEST_DAMAGE.items()},
          "entry.json is a link": _plant_link_manifest, "the files folder is a link": _plant_link_files,
          "a folder inside is a link": _plant_link_folder, "an unlisted file": _extra_file,
          "a file is a FIFO": _fifo_file, "another user's file": _another_users_file,
          "entry is a link": _plant_link_entry, "a file is a link": _plant_link_file, "a file changed": _changed_file,
          "a file is missing": _missing_file, "entry is group-writable": _group_writable,
          "a file is group-writable": _group_writable_file, "another user's entry": _another_users}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_or_planted_entry_is_rebuilt_never_read_through_a_link(cache, tmp_path, damage):
    _fresh, ledger = _run(tmp_path / "a")
    outside = tmp_path / "outside"
    DAMAGE[damage](_entry(cache), outside)
    planted = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} if outside.exists() else {}
    rebuilt, rebuilt_ledger = _run(tmp_path / "b")
    assert not rebuilt.reused_from_cache
    assert rebuilt_ledger.files == ledger.files  # generated afresh, the same bytes
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == planted  # a link's target untouched
    entry = _entry(cache)
    assert not entry.is_symlink() and not any(p.is_symlink() for p in entry.rglob("*"))
    assert _run(tmp_path / "c")[0].reused_from_cache  # the rebuilt entry is whole


def _lock_link(lock: Path, outside: Path) -> None:
    outside.mkdir()
    (outside / "victim").write_text("not the cache's\n")
    os.chmod(outside / "victim", 0o644)
    lock.symlink_to(outside / "victim")


def _lock_fifo(lock: Path, outside: Path) -> None:
    os.mkfifo(lock, 0o600)


@pytest.mark.parametrize("planted", ["a link", "a FIFO"])
def test_a_planted_lock_is_replaced_never_opened_through(cache, tmp_path, planted):
    """The key's lock file, planted before a run as a link or a FIFO: the run neither follows nor hangs on it."""
    _run(tmp_path / "a")
    (lock,) = [p for p in cache.iterdir() if p.name.endswith(".lock")]
    lock.unlink()
    outside = tmp_path / "outside"
    {"a link": _lock_link, "a FIFO": _lock_fifo}[planted](lock, outside)
    planted_files = {p: (p.read_bytes(), p.stat().st_mode) for p in outside.rglob("*")} if outside.exists() else {}
    again, _ = _run(tmp_path / "b")
    assert again.reused_from_cache  # the entry itself was whole
    assert lock.is_file() and not lock.is_symlink() and os.stat(lock).st_mode & 0o777 == 0o600
    assert ({p: (p.read_bytes(), p.stat().st_mode) for p in outside.rglob("*")} if outside.exists() else {}) == planted_files


def test_two_runs_at_once_with_one_key_take_turns(cache, tmp_path):
    start = threading.Barrier(2)
    results: dict[str, object] = {}

    def run(name: str) -> None:
        start.wait()
        results[name] = _run(tmp_path / name, generator="fastapi_backend", import_app=False)

    threads = [threading.Thread(target=run, args=(n,)) for n in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (x, lx), (y, ly) = results["x"], results["y"]  # type: ignore[misc]
    assert sorted([x.reused_from_cache, y.reused_from_cache]) == [False, True]  # one generated, one reused
    assert lx.files == ly.files
    assert _run(tmp_path / "z", generator="fastapi_backend", import_app=False)[0].reused_from_cache
    assert [p.name for p in cache.iterdir() if p.name.startswith((".stage-", ".discard-"))] == []


def test_an_unsafe_cache_folder_is_not_used_and_the_run_says_so(cache, tmp_path):
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o777)
    before = sorted(cache.iterdir())
    result, _ = _run(tmp_path / "a")
    assert not result.reused_from_cache and (tmp_path / "a").is_dir()
    (finding,) = [f for f in result.findings if f.code == "phase1_cache_unsafe"]
    assert "is not private" in finding.message and "BESSER_PHASE1_CACHE" in finding.message
    assert sorted(cache.iterdir()) == before  # nothing written into it
    assert not _run(tmp_path / "b")[0].reused_from_cache


def test_a_kept_check_report_of_another_shape_is_run_again(cache, tmp_path):
    """A report whose findings are not records (planted or torn): the files are reused, the checks run again."""
    fresh, _ = _run(tmp_path / "a", generator="fastapi_backend")
    entry = _entry(cache)
    manifest = json.loads((entry / "entry.json").read_text())
    assert manifest["checks"]  # a settled report was kept
    for report in manifest["checks"].values():
        report.update(findings=["x"], python_files=float("inf"))
    (entry / "entry.json").write_text(json.dumps(manifest))
    reused, _ = _run(tmp_path / "b", generator="fastapi_backend")
    assert reused.reused_from_cache and reused.checks.findings == fresh.checks.findings


def test_eviction_discards_an_entry_whose_manifest_is_damaged(cache, tmp_path):
    _run(tmp_path / "a")
    damaged = _entry(cache)
    _manifest_edit(lambda m: m.update(bytes=float("inf")))(damaged, tmp_path)
    assert not _run(tmp_path / "b", options={"backend": True})[0].reused_from_cache  # stores, then evicts
    assert [p for p in cache.iterdir() if not p.name.startswith(".")] != [damaged] and not damaged.exists()
    assert _run(tmp_path / "c", options={"backend": True})[0].reused_from_cache


def test_the_cache_stays_under_its_size_bound(cache, tmp_path, monkeypatch):
    _run(tmp_path / "a")
    size = sum(p.stat().st_size for p in (_entry(cache) / "files").rglob("*") if p.is_file())
    monkeypatch.setenv("BESSER_PHASE1_CACHE_MAX_MB", str((size * 1.5) / 2**20))  # room for one entry, not two
    _run(tmp_path / "b", options={"backend": True})
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 1  # the older one evicted
    assert _run(tmp_path / "c", options={"backend": True})[0].reused_from_cache
    assert not _run(tmp_path / "d")[0].reused_from_cache


def test_every_cached_generator_is_deterministic(tmp_path):
    """The cache assumes a generator's bytes are a function of its key: two fresh generations agree."""
    from kernel_ext.generation.runner import generate

    model = build_library_model()
    cached = [s for s in BESSER_TARGETS if cacheable(s, {"domain": model, "gui": None})]
    assert {"fastapi_backend", "pydantic", "sqlalchemy"} <= {s.name for s in cached}
    assert not any(s.confined for s in cached) and "supabase" not in {s.name for s in cached}
    for spec in cached:
        first = generate(spec, {"domain": model, "gui": None})
        second = generate(spec, {"domain": build_library_model(), "gui": None})
        assert first.files == second.files, f"{spec.name} is not deterministic"


def test_the_checks_key_follows_installs_not_the_current_folder(tmp_path, monkeypatch):
    """Output written below the current folder (on sys.path as itself or as "") keeps the kept checks' key;
    a package folder that changes (an install) does not."""
    from kernel_ext.generation.outputcache import checks_key

    here, packages = tmp_path / "here", tmp_path / "site-packages"
    here.mkdir()
    packages.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setattr(sys, "path", ["", str(here), str(packages), *sys.path])
    before = checks_key(True, None)
    (here / "out").mkdir()  # a run's output folder made below the current folder
    assert checks_key(True, None) == before
    (packages / "newpkg").mkdir()  # a package installed since
    os.utime(packages, ns=(1, 1))  # a time no earlier state of the folder had
    assert checks_key(True, None) != before
