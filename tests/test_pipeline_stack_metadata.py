"""No silent FastAPI (issue 19, item 5): a stack no BESSER generator covers takes the stack-metadata
path, through the real pipeline (no provider: Phase 1 and Phase 3 run for real)."""

from __future__ import annotations

import pytest
from pipeline_helpers import events_of, run_pipeline


@pytest.mark.parametrize(("request_text", "generator", "build_files", "named"), [
    ("A Rust backend with axum", "rust", ["Cargo.toml"], "Rust"),
    ("A Next.js app for the library", "nextjs", ["next-env.d.ts", "next.config.mjs", "package.json", "tsconfig.json"], "Next.js"),
    ("A Kotlin/Spring backend with REST endpoints", "kotlin_spring", ["build.gradle.kts", "settings.gradle.kts"], "Kotlin/Spring"),
])
def test_an_uncovered_stack_gets_its_build_files_and_a_timeline_line(tmp_path, request_text, generator, build_files, named):
    run, done = run_pipeline(tmp_path, request_text)
    select = next(e for e in events_of(run, "phase") if e.phase == "select" and e.status == "done")
    assert select.details["generator"] == generator and select.details["how"] == "stack-metadata"
    (said,) = [f for f in events_of(run, "finding") if f.source == "stack-metadata"]
    assert said.severity == "warning" and f"no BESSER generator covers {named}" in said.message
    app = run.context.layout.app_dir
    assert all((app / name).is_file() for name in build_files)
    assert not (app / "backend").exists()  # no FastAPI scaffold was written in its place
    assert done.authorship["generator_untouched"] == sorted(build_files)


def test_a_request_naming_a_covered_stack_keeps_its_generator(tmp_path):
    run, _done = run_pipeline(tmp_path, "A FastAPI backend, later a Next.js frontend")
    select = next(e for e in events_of(run, "phase") if e.phase == "select" and e.status == "done")
    assert select.details["generator"] == "fastapi_backend" and select.details["how"] == "rules"
    assert not [f for f in events_of(run, "finding") if f.source == "stack-metadata"]
