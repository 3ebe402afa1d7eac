"""The checkpoint store called directly on real folders: what it records, lists, previews and restores.

Mutation testing (``make mutation``, bench/MUTATION.md) showed these unpinned by the tool-level
tests: the label rule's edges and words, the metadata written, the private modes of the
state folder, the listing's fields and order, a preview's counts (also of a deleted origin,
and its refusal when a file sits in the way), restore's counts and its root's mode, the words
of each refusal, and a checkpoint taken before origins were recorded as components.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox.shtools.checkpoints import (
    DEFAULT_SKIP,
    CheckpointStore,
    check_label,
    project_key,
)
from kernel_ext.workspace.treebudget import TreeLimits


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "app").mkdir(parents=True)
    (root / "app" / "main.py").write_text("print('v1')\n")
    (root / "app" / "util.py").write_text("U = 1\n")
    (root / "top.txt").write_text("top\n")
    (root / ".besser").mkdir()
    (root / ".besser" / "run.json").write_text("{}")
    return root


@pytest.fixture
def store(tmp_path, project):
    return CheckpointStore(tmp_path / "state", project)


def refused(fn, *args, **kwargs) -> ToolFailure:
    with pytest.raises(ToolFailure) as failure:
        fn(*args, **kwargs)
    return failure.value


def test_labels_are_1_to_64_safe_characters_starting_with_a_letter_or_digit():
    for good in ("a", "A9", "v1.2_rc-3", "x" * 64, "0"):
        assert check_label(good) == good
    for bad in ("", ".", "..", "-a", ".a", "_a", "a/b", "a b", "x" * 65, "é", "a\n", "a\nb", None, 5):
        failure = refused(check_label, bad)
        assert failure.code == ErrorCode.INVALID_LABEL
        assert failure.message == (
            f"checkpoint label {bad!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-' (no '/'), "
            "starting with a letter or digit"
        )


def test_the_project_key_is_the_real_paths_hash(tmp_path, project):
    import hashlib

    os.symlink(project, tmp_path / "alias")
    expected = hashlib.sha256(str(project).encode()).hexdigest()[:16]
    assert project_key(project) == project_key(tmp_path / "alias") == expected
    assert CheckpointStore(tmp_path / "state", tmp_path / "alias").root == tmp_path / "state" / "checkpoints" / expected


def test_a_checkpoint_records_what_it_copied_and_keeps_its_state_private(store, project, tmp_path):
    os.symlink("app/main.py", project / "current")
    (project / "app").chmod(0o750)
    meta = store.create("one")
    assert meta["label"] == "one" and meta["origin"] == str(project) and meta["origin_parts"] == []
    assert meta["project"] == str(project)
    assert (meta["files"], meta["dirs"], meta["links"]) == (3, 1, 1)
    assert meta["bytes"] == len("print('v1')\n") + len("U = 1\n") + len("top\n")
    assert meta["hardlinked"] == 0 and meta["specials_skipped"] == 0
    assert meta["skipped"] == sorted(DEFAULT_SKIP) and meta["method"] in ("copy", "reflink", "reflink+copy")
    assert store.get("one") == json.loads(json.dumps(meta))
    generation = os.readlink(store.root / "one")
    assert generation.startswith(".gen-one-")
    tree = store.root / generation / "tree"
    assert not (tree / ".besser").exists()  # the run's own folder is skipped
    assert stat.S_IMODE(os.stat(store.root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tree).st_mode) == stat.S_IMODE(os.stat(project).st_mode)  # the origin's own mode
    assert stat.S_IMODE(os.stat(tree / "app").st_mode) == 0o750
    assert not [n for n in os.listdir(store.root) if n.startswith(".link-")]


def test_a_checkpoint_of_a_folder_records_its_components(store, project):
    meta = store.create("sub", "app")
    assert meta["origin"] == str(project / "app") and meta["origin_parts"] == ["app"]
    assert (meta["files"], meta["dirs"]) == (2, 0)
    absolute = store.create("abs", str(project / "app"))
    assert absolute["origin_parts"] == ["app"]


def test_a_checkpoint_past_its_budget_is_refused_by_name_and_keeps_nothing(tmp_path, project):
    small = CheckpointStore(tmp_path / "state", project, TreeLimits("checkpoint", 0, 2))
    failure = refused(small.create, "big")
    assert failure.code == ErrorCode.TREE_TOO_LARGE
    assert failure.message.startswith("checkpoint 'big' of '.' refused, nothing kept: ")
    assert os.listdir(small.root) == []


def test_a_missing_origin_is_named_and_keeps_nothing(store, project):
    failure = refused(store.create, "gone", "nothere")
    assert failure.code == ErrorCode.NOT_FOUND and failure.message == "'nothere' does not exist"
    file_origin = refused(store.create, "file", "top.txt")
    assert file_origin.code == ErrorCode.NOT_FOUND
    assert file_origin.message == "'top.txt' is not a directory ('top.txt' is not a directory)"
    assert os.listdir(store.root) == []


def test_the_listing_names_each_checkpoint_in_the_order_taken(store, project, tmp_path):
    assert CheckpointStore(tmp_path / "nowhere", project).list() == []
    store.create("b-first")
    store.create("a-second", "app")
    (store.root / "stray").symlink_to(".gen-missing")  # a label whose generation is gone: skipped
    (store.root / "not-a-label").write_text("x")  # not a link: skipped
    listed = store.list()
    assert [c["label"] for c in listed] == ["b-first", "a-second"]
    assert set(listed[0]) == {"label", "origin", "created_at", "files", "entries", "bytes", "method"}
    assert listed[1]["origin"] == str(project / "app") and listed[1]["files"] == 2
    assert listed[0]["created_at"] <= listed[1]["created_at"]


def test_an_unknown_label_names_the_known_ones(store):
    assert refused(store.get, "x").message == "no checkpoint 'x' in this project (known: none)"
    store.create("one")
    store.create("two")
    failure = refused(store.get, "three")
    assert failure.code == ErrorCode.UNKNOWN_CHECKPOINT
    assert failure.message == "no checkpoint 'three' in this project (known: one, two)"


def test_a_restore_target_is_the_origin_or_refused_by_name(store, project):
    store.create("sub", "app")
    meta, loc = store.target_for("sub")
    assert loc.parts == ("app",) and meta["label"] == "sub"
    assert store.target_for("sub", "app")[1].parts == ("app",)
    assert store.target_for("sub", str(project / "app"))[1].parts == ("app",)
    assert store.target_for("sub", "app/../app/")[1].parts == ("app",)
    failure = refused(store.target_for, "sub", ".")
    assert failure.code == ErrorCode.CHECKPOINT_ORIGIN_MISMATCH
    assert failure.message == (
        f"checkpoint 'sub' was taken of {str(project / 'app')!r}; it can only be restored there, not into {str(project)!r}"
    )


def test_preview_counts_what_restore_then_does(store, project):
    store.create("one")
    (project / "app" / "main.py").write_text("print('v2')\n")
    (project / "new.txt").write_text("added\n")
    preview = store.preview("one")
    assert {k: preview[k] for k in ("label", "dir", "written", "removed", "unchanged", "files")} == {
        "label": "one", "dir": ".", "written": 1, "removed": 1, "unchanged": 2, "files": 3,
    }
    assert preview["created_at"] == store.get("one")["created_at"]
    assert (project / "new.txt").exists()  # a preview changes nothing
    done = store.restore("one")
    assert done == {"label": "one", "dir": str(project), "written": 1, "removed": 1, "unchanged": 2, "files": 3}
    assert (project / "app" / "main.py").read_text() == "print('v1')\n" and not (project / "new.txt").exists()
    assert (project / ".besser" / "run.json").exists()  # the skipped folder is left alone


def test_preview_and_restore_of_a_deleted_origin(store, project):
    import shutil

    store.create("sub", "app")
    shutil.rmtree(project / "app")
    preview = store.preview("sub")
    assert (preview["dir"], preview["written"], preview["removed"], preview["unchanged"]) == ("app", 2, 0, 0)
    (project / "app").mkdir(mode=0o700)
    os.rmdir(project / "app")
    done = store.restore("sub")
    assert (done["dir"], done["written"]) == (str(project / "app"), 2)
    assert (project / "app" / "util.py").read_text() == "U = 1\n"


def test_preview_refuses_when_a_file_or_a_link_sits_where_the_origin_was(store, project, tmp_path):
    import shutil

    store.create("deep", "app")
    shutil.rmtree(project / "app")
    (project / "app").write_text("a file now\n")
    failure = refused(store.preview, "deep")
    assert failure.code == ErrorCode.NOT_FOUND
    assert failure.message == "'app' is not a directory ('app' is not a directory)"
    (project / "app").unlink()
    (project / "app").symlink_to(tmp_path)
    assert refused(store.preview, "deep").code == ErrorCode.SYMLINK_REFUSED


def test_preview_of_a_nested_origin_whose_parent_is_gone_counts_everything(tmp_path, project):
    import shutil

    (project / "app" / "inner").mkdir()
    (project / "app" / "inner" / "i.txt").write_text("i\n")
    store = CheckpointStore(tmp_path / "state", project)
    store.create("inner", "app/inner")
    shutil.rmtree(project / "app")
    assert store.preview("inner")["written"] == 1
    (project / "app").write_text("in the way\n")
    assert refused(store.preview, "inner").code == ErrorCode.NOT_FOUND


def test_restore_gives_the_folder_its_recorded_mode(store, project):
    (project / "app").chmod(0o750)
    store.create("sub", "app")
    (project / "app").chmod(0o777)
    store.restore("sub")
    assert stat.S_IMODE(os.stat(project / "app").st_mode) == 0o750


def test_a_checkpoint_taken_before_components_were_recorded_is_restored_by_its_origin_text(store, project):
    store.create("old", "app")
    meta_path = store.root / os.readlink(store.root / "old") / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["origin_parts"]
    meta_path.write_text(json.dumps(meta))
    assert store.target_for("old")[1].parts == ("app",)
    meta["origin"] = "/elsewhere/app"
    meta_path.write_text(json.dumps(meta))
    failure = refused(store.target_for, "old")
    assert failure.code == ErrorCode.OUTSIDE_WORKSPACE
    assert failure.message == "checkpoint origin '/elsewhere/app' is outside this project"
    del meta["skipped"]
    meta["origin"] = str(project)
    meta_path.write_text(json.dumps(meta))
    (project / ".besser" / "run.json").write_text("changed")
    store.restore("old")  # without a recorded skip list the default one applies: .besser left alone
    assert (project / ".besser" / "run.json").read_text() == "changed"


def test_a_disk_failure_while_taking_a_checkpoint_is_named_and_keeps_nothing(store, monkeypatch):
    import errno

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # fault injection: the state disk is full

    monkeypatch.setattr(os, "symlink", no_space)
    failure = refused(store.create, "full")
    monkeypatch.undo()
    assert failure.code == ErrorCode.EXECUTION_FAILED
    assert failure.message == "could not write the checkpoint: No space left on device"
    assert os.listdir(store.root) == []


def test_republishing_a_label_removes_the_previous_generation(store, project):
    store.create("same")
    first = os.readlink(store.root / "same")
    (project / "top.txt").write_text("v2\n")
    store.create("same")
    second = os.readlink(store.root / "same")
    assert second != first and not (store.root / first).exists()
    assert sorted(os.listdir(store.root)) == sorted([second, "same"])


def test_a_preview_into_another_folder_is_refused_like_the_restore(store, project):
    store.create("sub", "app")
    failure = refused(store.preview, "sub", ".")
    assert failure.code == ErrorCode.CHECKPOINT_ORIGIN_MISMATCH
    assert store.preview("sub", "app")["dir"] == "app"


def test_the_skip_list_recorded_is_the_one_restore_keeps_to(store, project):
    (project / "cache").mkdir()
    (project / "cache" / "c.bin").write_text("cache v1\n")
    store.create("own-skip", skip=frozenset({"cache"}))
    assert store.get("own-skip")["skipped"] == ["cache"]
    (project / "cache" / "c.bin").write_text("cache v2\n")
    (project / ".besser" / "run.json").write_text("changed")
    store.restore("own-skip")
    assert (project / "cache" / "c.bin").read_text() == "cache v2\n"  # skipped: left alone
    assert (project / ".besser" / "run.json").read_text() == "{}"  # not skipped this time: restored


@pytest.mark.parametrize("filename, shown", [(None, "a file"), ("app/main.py", "app/main.py")])
def test_a_disk_failure_during_a_restore_is_named_with_the_file(store, project, monkeypatch, filename, shown):
    import errno

    store.create("one")

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), filename)  # fault injection: the project went read-only

    monkeypatch.setattr(os, "fchmod", read_only)
    failure = refused(store.restore, "one")
    monkeypatch.undo()
    assert failure.code == ErrorCode.EXECUTION_FAILED
    assert failure.message == f"restore stopped part-way: Read-only file system ({shown})"


def test_the_listing_skips_broken_and_leftover_entries_and_keeps_every_good_one(store, project):
    good = [f"good-{n}" for n in range(10)]
    for label in good:
        store.create(label)
    generation = os.readlink(store.root / "good-0")
    (store.root / ".link-0a1b2c3d").symlink_to(generation)  # a create killed between its link and the rename
    for n in range(10):
        (store.root / f"broken-{n}").symlink_to(f".gen-gone-{n}")  # generation removed under it
    listed = [c["label"] for c in store.list()]
    assert sorted(listed) == sorted(good)  # every good one, whatever order the folder lists them in


def test_the_stores_fence_hides_and_protects_nothing_a_command_could_change(store, project):
    """The sandboxed shell can change .git and .besser too: a checkpoint covers them when asked to."""
    (project / ".git" / "hooks").mkdir(parents=True)
    (project / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    store.create("hooks", ".git/hooks")
    store.create("state", ".besser")
    import shutil

    shutil.rmtree(project / ".git")
    (project / ".besser" / "run.json").write_text("changed")
    store.restore("hooks")
    store.restore("state")
    assert (project / ".git" / "hooks" / "pre-commit").read_text() == "#!/bin/sh\n"
    assert (project / ".besser" / "run.json").read_text() == "{}"


@pytest.mark.parametrize("setting", ["BESSER_CHECKPOINT_STORE_MAX_BYTES", "BESSER_CHECKPOINT_STORE_MAX_FILES"])
def test_a_store_already_full_refuses_a_new_label_before_copying_and_still_replaces_one(store, project, monkeypatch, setting):
    """No room left must refuse: a room of 0 must never become "0 = unlimited"."""
    first = store.create("first")
    used = first["bytes"] if setting.endswith("BYTES") else first["files"]
    monkeypatch.setenv(setting, str(used))
    before = sorted(os.listdir(store.root))
    failure = refused(store.create, "second")
    assert failure.code == ErrorCode.TREE_TOO_LARGE
    assert failure.message == (
        "checkpoint 'second' refused, nothing kept: this project's 1 checkpoint(s) already fill the store "
        "(BESSER_CHECKPOINT_STORE_MAX_BYTES / _MAX_FILES); replace an existing label instead"
    )
    assert sorted(os.listdir(store.root)) == before
    if setting.endswith("BYTES"):  # (the entry budget also counts folders: 3 files do not fit a copy of 3 files and a folder)
        assert store.create("first")["label"] == "first"  # the label being replaced does not count


def test_the_listing_counts_files_folders_and_links_as_entries(store, project):
    """What the store budget charges each checkpoint; a checkpoint recorded before folders and
    links were counted is charged its files."""
    (project / "app" / "deeper").mkdir()
    (project / "top-link").symlink_to("top.txt")
    meta = store.create("one")
    assert (meta["files"], meta["dirs"], meta["links"]) == (3, 2, 1)  # .besser is skipped
    assert [c["entries"] for c in store.list()] == [6]
    meta_path = store.root / os.readlink(store.root / "one") / "meta.json"
    del meta["dirs"], meta["links"]
    meta_path.write_text(json.dumps(meta))
    assert [c["entries"] for c in store.list()] == [3]
