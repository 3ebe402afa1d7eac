"""``run.json``: the recipe of a run, enough to understand (and later continue) it.

It records the model digest, the request, the generator, task outcomes, phase durations and
a manifest of the final tree with hashes (internal folders excluded). No secret enters it:
it is built from the same redacted values as the events.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ext.hosting.layout import RunLayout
from kernel_ext.secrets import redact
from kernel_ext.workspace import treewalk

if TYPE_CHECKING:  # BESSER loads with the first model
    from besser.BUML.metamodel.structural import DomainModel

    from kernel_ext.hosting.options import RunRequest
    from kernel_ext.pipeline.phase3 import Phase3Result
    from kernel_ext.providers.base import Provider

FRONTEND_SUFFIXES = (".tsx", ".jsx", ".ts", ".js", ".vue", ".svelte", ".html")
FRONTEND_DIRS = ("frontend", "web", "client", "ui")


def frontend_files(app_dir: Path) -> list[str]:
    """Frontend source files in the app (under a frontend-like folder), through descriptors, links not followed."""
    found: list[str] = []
    try:
        app_fd = treewalk.open_dir(app_dir)
    except OSError:
        return found
    try:
        for folder in FRONTEND_DIRS:
            try:
                fd = treewalk.open_dir(folder, app_fd)
            except OSError:
                continue  # absent, not a folder, or a link: never entered
            try:
                found += [f"{folder}/{rel}" for rel, st in treewalk.walk(fd, frozenset({"node_modules"}))
                          if stat.S_ISREG(st.st_mode) and rel.endswith(FRONTEND_SUFFIXES)]
            finally:
                os.close(fd)
    finally:
        os.close(app_fd)
    return sorted(found)


def write_recipe(
    layout: RunLayout,
    request: RunRequest,
    generator: str,
    model: DomainModel,
    tasks: list[dict[str, Any]],
    manifest: dict[str, str],
    *,
    phase_durations: dict[str, float],
    provider: Provider | None = None,
    phase3: Phase3Result | None = None,
    generated: dict[str, str] | None = None,
    base_run_id: str | None = None,
    known_secrets: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Write ``run.json``; ``known_secrets`` are the run's (its events' ``EventLog`` holds the same)."""
    from kernel_ext.model.jsonform import model_digest, model_to_dict

    recipe = {
        "run_id": layout.run_id,
        "base_run_id": base_run_id,
        "request": request.request,
        "model": {"name": getattr(model, "name", ""), "digest": model_digest(model), "form": model_to_dict(model)},
        "generator": generator,
        "provider": provider.describe() if provider is not None else {"kind": "none", "label": "none"},
        "tasks": [{k: v for k, v in t.items() if k != "has_check"} for t in tasks],
        "phase_durations": phase_durations,
        "phase3": None if phase3 is None else {
            "rounds": phase3.rounds, "rolled_back": phase3.rolled_back, "stop_reason": phase3.stop_reason,
            "rank": list(phase3.report.rank()),
        },
    }
    recipe = redact(recipe, known_secrets)  # task texts come from the model, which may echo a key
    recipe["files"] = dict(manifest)  # path -> sha256: file names such as auth.py are not secrets
    recipe["generated"] = dict(generated or {})  # what the generator wrote: the authorship split of later runs
    tmp = layout.recipe_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(recipe, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, layout.recipe_path)
    return recipe
