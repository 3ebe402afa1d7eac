"""The program a confined generator runs as: run inside the sandbox only, never by the host.

Some BESSER generators start processes that execute model-derived code (the SQL generator runs
the generated ``sql_alchemy.py``, method bodies included, to dump its DDL; the Django generator
runs ``django-admin`` and ``manage.py``). Such a generator runs whole in a one-off sandbox
(``generation/confined.py``): this program reads the job the host wrote (the models, the
target, its options), runs the target's ``produce`` into the output folder, and exits. The host
reads the output back through descriptors and publishes it; nothing here talks back to it but
the exit code and the last line of stderr.

Started by ``confined.py`` as ``sandbox.boot.package_program(<this module>, JOB_FILE, OUT_DIR)``.
"""

from __future__ import annotations

import pickle
import sys
import traceback
from pathlib import Path

FAILED = "BESSER-GENERATOR-FAILED: "


def main(argv: list[str]) -> int:
    job_file, out = argv
    with open(job_file, "rb") as handle:
        # The job was written by the host from its own in-memory models (host -> sandbox only;
        # the host never unpickles anything a sandbox wrote).
        job = pickle.load(handle)
    from kernel_ext.generation.registry import get_target

    spec = get_target(job["target"])
    try:
        options = spec.options.model_validate(job["options"])
        spec.produce(job["models"], Path(out), options)
    except BaseException as exc:  # noqa: BLE001 - any failure is one named line for the host
        traceback.print_exc(limit=4, file=sys.stderr)
        print(f"\n{FAILED}{_one_line(f'{type(exc).__name__}: {exc}')}", file=sys.stderr)
        return 1
    return 0


def _one_line(text: str, limit: int = 1000) -> str:
    """One bounded line: the first line says what failed, the last says why (the error a script
    BESSER ran ended with, its traceback between them dropped)."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()] or [""]
    head, tail = lines[0][: limit // 2], lines[-1][-(limit // 2):]
    return head if len(lines) == 1 else f"{head} ... {tail}"


if __name__ == "__main__":  # pragma: no cover - started by the boot line in the sandbox
    sys.exit(main(sys.argv[1:]))
