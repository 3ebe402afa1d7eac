"""``export RUN_ID [--runs-dir DIR] [--to FILE.ipynb] [--force]``: a finished run as a notebook.

The same export as ``%besser export`` (``hosting/export``): the run is named by its id and found in
the run store (``./besser_runs`` unless ``--runs-dir``), never by a typed path (``../x`` or an
absolute path is ``INVALID_RUN_ID``); the notebook goes to ``RUN_ID.ipynb`` in the current folder
unless ``--to`` names another place. Exit 0 with the path written, 2 with one
``error: CODE: message`` line when it is refused (no run, not finished, the file exists).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("export", help="write a finished run as a notebook that re-runs it offline")
    parser.add_argument("run_id", help="the run's id (`besser_runs/RUN_ID`)")
    parser.add_argument("--runs-dir", type=Path, default=Path("besser_runs"), help="the run store (default: ./besser_runs)")
    parser.add_argument("--to", default=None, help="the notebook file or a folder (default: RUN_ID.ipynb here)")
    parser.add_argument("--force", action="store_true", help="replace an existing file")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from kernel_ext.hosting.export import ExportRefused, export_run
    from kernel_ext.safetext import shown_line

    try:
        path = export_run(args.run_id, args.to, force=args.force, runs_dir=args.runs_dir)
    except ExportRefused as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    print(f"exported run {args.run_id} to {shown_line(str(path))}")
    return 0
