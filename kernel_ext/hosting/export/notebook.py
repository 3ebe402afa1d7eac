"""A finished run as a notebook file (nbformat): assembled, cut of secrets, written without loss.

Secrets: everything the run stored was redacted when it was written; the export cuts the known
secrets of the exporting process again (the run's own keys may not have been known when a line
was written) and whatever is shaped like a key (``secrets.redact_text``, as events are): from the
text of the reading (markdown) cells, and from each value the runnable cells carry before it is
written as a literal (``rerun``, ``codebuild``), never from code text. A key-shaped token the run
sent or received is never handed out, though a replay then writes ``[redacted]`` where the run
wrote it (the re-run's comparison names such files).

Writing: the file appears whole or not at all (a temporary file beside it, then a hard link, which
fails if the name exists, or a rename under ``force``), so an existing notebook is never lost; a
link at the name is refused, ``force`` or not, and nothing is ever written through one. The folders
on the way are the person's to name: a link among them is followed, as a shell would (a classroom's
home folder is often one). Messages name paths as ``safetext.shown_line`` shows them. A run is
named by its id (``find_run``: the run store's rule), so a typed name never leads out of the store.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernel_ext.codebuild import CodeNotBuilt
from kernel_ext.hosting.export import rerun, sections
from kernel_ext.hosting.export.record import ExportRefused, RunRecord, read_run
from kernel_ext.hosting.export.sections import Cell

FORMAT = 1  # the ``besser_export`` metadata's version


def build_notebook(record: RunRecord, known: Iterable[str] = ()) -> Any:
    """The nbformat v4 notebook of ``record``, with ``known`` secrets cut from every string."""
    import nbformat

    from kernel_ext.safetext import shown_text
    from kernel_ext.secrets import redact_text
    from kernel_ext.version import __version__

    known = tuple(known)
    head = sections.overview(record, __version__)
    reading: list[Cell] = [
        *sections.request(record),
        *sections.timeline(record),
        *sections.decided_calls(record),
        *sections.findings(record),
        *sections.request_reports(record),
        *sections.authorship(record),
    ]
    # Runnable cells are built from values already cut (``rerun``: known keys, bearer credentials, key
    # shapes) and checked as code; their text is never edited here. A replay of a run whose request or
    # replies held a key-shaped token then writes `[redacted]` where the run wrote it, and its comparison says so.
    try:
        model, replay = rerun.model_cells(record, known), rerun.rerun_cells(record, known)
    except CodeNotBuilt as exc:  # nothing is written: the export is refused whole
        raise ExportRefused(CodeNotBuilt.code, f"run {record.run_id}'s runnable cells failed their check ({exc})") from None

    def shown(kind: str, source: str) -> str:  # what a person reads: no key, nothing that reorders or splits a line
        return source if kind == "code" else shown_text(redact_text(source, known))

    cells = [_cell(kind, shown(kind, source)) for kind, source in [*head, *model, *reading, *replay]]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata.update({
        **kernel_metadata(),
        "besser_export": {"format": FORMAT, "run_id": record.run_id, "status": record.done.status,
                          "model_digest": record.recipe["model"].get("digest", "")},
    })
    nbformat.validate(notebook)
    return notebook


def kernel_metadata() -> dict[str, Any]:
    """What JupyterLab writes into a notebook when ipykernel's ``python3`` starts on it: saved in
    the export, so it opens unmarked (a notebook whose metadata differs opens "unsaved")."""
    import platform

    return {
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
        "language_info": {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                          "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                          "pygments_lexer": "ipython3", "version": platform.python_version()},
    }


def _cell(kind: str, source: str) -> Any:
    import nbformat

    return nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)


def export_run(run: str | Path, to: str | Path | None = None, *, force: bool = False,
               known: Iterable[str] | None = None, runs_dir: str | Path | None = None) -> Path:
    """Write a finished run as a notebook; the path written. ``run``: the run's folder, or with
    ``runs_dir`` (the run store) a run id matched against it (what the CLI passes: a typed name is
    never a path); ``to``: a file (``.ipynb``) or a folder (default: ``<run id>.ipynb`` in the
    current folder); ``known``: secrets to cut (default: the secret-named values of this process's
    environment)."""
    from kernel_ext.secrets import secret_values

    run_dir = find_run(runs_dir, run) if runs_dir is not None else Path(run)
    target = target_path(Path(run_dir).name, to, force=force)  # refused before any work
    text = notebook_text(run_dir, secret_values() if known is None else known)
    write_notebook(target, text, force=force)
    return target


def find_run(runs_dir: str | Path, run_id: str | Path) -> Path:
    """The folder of run ``run_id`` in the store ``runs_dir`` (``INVALID_RUN_ID``, ``RUN_NOT_FOUND``)."""
    from kernel_ext.hosting.layout import InvalidRunId, check_run_id, run_folder

    try:
        check_run_id(str(run_id))
    except InvalidRunId as exc:
        raise ExportRefused(InvalidRunId.code, str(exc)) from None
    folder = run_folder(Path(runs_dir), str(run_id))
    if folder is None:
        raise ExportRefused("RUN_NOT_FOUND", f"no run {str(run_id)!r} in {runs_dir}")
    return folder


def notebook_text(run_dir: str | Path, known: Iterable[str]) -> str:
    """The export of run ``run_dir`` as notebook JSON text (what the REST route answers)."""
    import nbformat

    return nbformat.writes(build_notebook(read_run(run_dir), known)) + "\n"


def checked_text(data: Any) -> str:
    """Notebook JSON another process built (the server's answer), validated before it is written."""
    import nbformat

    try:
        notebook = nbformat.from_dict(data)
        nbformat.validate(notebook)
    except Exception as exc:  # noqa: BLE001 - any shape nbformat refuses is one named refusal
        raise ExportRefused("NOT_EXPORTABLE", f"the server's notebook is not valid ({type(exc).__name__})") from None
    return nbformat.writes(notebook) + "\n"


def target_path(run_id: str, to: str | Path | None, *, force: bool = False) -> Path:
    """Where the export goes: ``to`` (a ``.ipynb`` file, or a folder for ``<run id>.ipynb``) or the
    current folder; an existing file is refused unless ``force``, a link always (never followed)."""
    from kernel_ext.hosting.layout import InvalidRunId, check_run_id

    try:
        check_run_id(run_id)  # the default name is made of it: it must stay one name in one folder
    except InvalidRunId as exc:
        raise ExportRefused(InvalidRunId.code, str(exc)) from None
    if to is not None and str(to) == "":
        raise ExportRefused("INVALID_PATH", "the target is empty: leave it out to write the run's notebook in the current folder")
    path = Path.cwd() if to is None else Path(to)
    if "\0" in str(path):
        raise ExportRefused("INVALID_PATH", f"{path} holds a NUL character, which no file name can")
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        raise ExportRefused("INVALID_PATH", f"{path} holds characters this file system cannot name") from None
    try:
        return _checked_target(path.expanduser(), run_id, force, folder=str(to).endswith(os.sep))
    except RuntimeError:  # ``~name`` of a user this machine does not have
        raise ExportRefused("INVALID_PATH", f"cannot write {path}: no home folder for {path.parts[0]!r}") from None
    except OSError as exc:  # a name the file system refuses to look up (too long, a loop): one line
        raise ExportRefused("INVALID_PATH", f"cannot write {path}: {exc.strerror or exc}") from None


def _checked_target(path: Path, run_id: str, force: bool, *, folder: bool) -> Path:
    """``target_path``'s checks on the expanded path; ``folder``: it was typed with a trailing slash
    (which pathlib drops), so it must name a folder."""
    if path.is_symlink():
        raise ExportRefused("INVALID_PATH", f"{path} is a symbolic link; an export never writes through one")
    if folder and not path.is_dir():
        raise ExportRefused("INVALID_PATH", f"{path} is not a folder")
    if path.is_dir():
        path = path / f"{run_id}.ipynb"
    if path.is_symlink():
        raise ExportRefused("INVALID_PATH", f"{path} is a symbolic link; an export never writes through one")
    if path.is_dir():
        raise ExportRefused("INVALID_PATH", f"{path} is a folder; name the notebook file to write instead")
    if path.suffix != ".ipynb":
        raise ExportRefused("INVALID_PATH", f"{path} is not a notebook name (it must end in .ipynb)")
    if not path.parent.is_dir():
        raise ExportRefused("INVALID_PATH", f"{path.parent} is not a folder")
    if (path.exists() or path.is_symlink()) and not force:
        raise ExportRefused("EXPORT_EXISTS", f"{path} already exists; pass --force to replace it")
    return path


def write_notebook(target: Path, text: str, *, force: bool = False) -> None:
    """Write ``text`` at ``target`` whole or not at all (see the module's doc)."""
    temporary = target.parent / f".besser-export-{secrets.token_hex(6)}.tmp"  # short: any legal file name fits
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)  # umask applies
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if force:
            os.replace(temporary, target)  # replaces a name (a link planted since the check, not its target)
        else:
            try:
                os.link(temporary, target)  # fails if the name appeared meanwhile: nothing is replaced
            except FileExistsError:
                raise ExportRefused("EXPORT_EXISTS", f"{target} already exists; pass --force to replace it") from None
    except OSError as exc:
        raise ExportRefused("EXPORT_UNWRITABLE", f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):  # a cleanup that fails never hides the refusal above
            temporary.unlink(missing_ok=True)
