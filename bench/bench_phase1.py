"""Phase 1 and model questions, side by side with what BESSER costs on its own.

1. Phase 1 for the Library model and synthetic models of 10, 50 and 200 classes:
   ``run_phase1`` (generate into a private directory, publish every file through the fence,
   hash it) against the baseline, ``BackendGenerator(...).generate()`` called directly into a
   fresh directory. Rounds are interleaved. The output checks (syntax, imports, importing
   ``main_api`` in a fresh interpreter) are timed separately: they are what Phase 1 adds.
2. ``query_class`` on the 200-class model through the real Executor (validate, policy,
   dispatch, bounded rendering; the index is built once per run) against a direct
   ``describe_class`` lookup, and against BESSER's agent serialising the whole model
   (``serialize_domain_model``), which is what a model question costs without an index.
3. The size of what the LLM is handed for 200 classes: our overview against BESSER's whole
   serialised model. Tokens are estimated as characters / 4 (no tokenizer is available offline).
4. Where the output checks' time goes (library and 200 classes): the host's compile of every
   file beside the tree ``ast.parse`` made of every file before; then the sandboxed import, split
   by wall-clock marks into staging the copy, the sandbox's start, the framework's import (what a
   pre-imported template interpreter at ``appimport.confined_import`` would save), the app's own
   modules and the exit; and the import program as it was before (database on disk, interpreter
   torn down) beside today's, in the same rounds.
5. A class of 30 on one model: 30 ``run_phase1`` calls at once (threads, as a server runs
   them), the output cache off (the baseline) and on; p95 and CPU seconds per run.

Phase 1 runs with ``BESSER_PHASE1_CACHE=off`` except in 5 (each round would be a cache hit).

Run: ``.venv/bin/python bench/bench_phase1.py``
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from common import Figure, Target, emit, figure  # noqa: E402

os.environ["BESSER_PHASE1_CACHE"] = "off"
ROUNDS = 5
CLASS_SIZE = 30
CHECK_ROUNDS = 3
QUERIES = 400
FIGURES: list[Figure] = []  # what main() emits for bench/run_all.py
# Why the output-check targets are missed, from the 'checks breakdown' figures (2026-12, H4, two runs
# at load average 6-14 on 2 cores, so absolute times are above a quiet machine's; ratios are same-run).
CHECKS_MISS = {
    "library (5)": "the framework's import in the sandbox (fastapi, sqlalchemy.orm, pydantic) is 1.9-6.4 s "
                   "of a 3.0-7.2 s sandboxed import (~60-90%), the app's own modules 0.5-1.4 s, sandbox start 0.2-0.5 s, "
                   "host part and staging < 0.05 s: only a pre-imported template interpreter at "
                   "appimport.confined_import (the seam) can bring it near 0.5 s. The database on the sandbox's tmpfs and "
                   "os._exit made the sandboxed import 0.56-0.65x (same runs)",
    "200 classes": "the app's own modules alone are 2.0 s at load 6 (15 s at load 9; pydantic models, "
                   "SQLAlchemy mappers and create_all of 200 tables, ~2,400 FastAPI routes: the app's own start, which a "
                   "template does not remove), above the 2 s target by themselves; then the host's compile (0.4-1.5 s, "
                   "2.5 MB once) and the framework's import. Staging moved to /dev/shm (0.32x) and the database and "
                   "os._exit cuts made the sandboxed import 0.57-0.64x (0.93x in one run under test load). Next cut, not "
                   "made: start the sandbox and the framework's import while the host compiles (a gate in the copy), "
                   "which needs the import timeout to start at the gate",
}


def _figure(samples: list[float], unit: str = "ms", scale: float = 1000.0) -> str:
    values = [s * scale for s in samples]
    return f"median {statistics.median(values):8.2f} {unit} (min {min(values):.2f} - max {max(values):.2f})"


def _models() -> dict[str, object]:
    from kernel_ext.model import build_library_model, synthetic_model

    return {"library (5)": build_library_model, "10 classes": lambda: synthetic_model(10),
            "50 classes": lambda: synthetic_model(50), "200 classes": lambda: synthetic_model(200)}


def bench_phase1() -> None:
    from besser.generators.backend import BackendGenerator

    from kernel_ext.generation import run_phase1

    print("1. Phase 1, FastAPI backend (rounds interleaved)")
    medians: dict[str, tuple[float, float]] = {}
    for label, build in _models().items():
        model = build()
        base, ours, inner, checks = [], [], [], []
        files = 0
        for i in range(ROUNDS):
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                BackendGenerator(model=model, http_methods=["GET", "POST", "PUT", "DELETE"], output_dir=str(Path(tmp) / "b")).generate()
                base.append(time.perf_counter() - start)
                start = time.perf_counter()
                result = run_phase1(model, Path(tmp) / "app", "fastapi_backend", check=False)
                ours.append(time.perf_counter() - start)
                inner.append(result.generator_seconds)
                files = len(result.files)
                if i < CHECK_ROUNDS:
                    shutil.rmtree(Path(tmp) / "app")
                    result = run_phase1(model, Path(tmp) / "app", "fastapi_backend")
                    assert result.ok, result.findings
                    checks.append(result.checks.seconds)
        ratio = statistics.median(ours) / statistics.median(base)
        medians[label] = (statistics.median(base), statistics.median(ours))
        print(f"   {label:12} {files:4d} files")
        print(f"      baseline: BackendGenerator direct   {_figure(base)}")
        print(f"      run_phase1 (no checks)              {_figure(ours)}  = {ratio:.2f}x baseline")
        print(f"        of which BESSER's generator       {_figure(inner)}")
        print(f"        publish through fence + hashes    {_figure([o - g for o, g in zip(ours, inner, strict=True)])}")
        print(f"      output checks (syntax, imports, app import in a fresh interpreter) {_figure(checks)}")
        ms = lambda values: [v * 1000 for v in values]  # noqa: E731
        FIGURES.append(figure(f"run_phase1 {label} (no checks)", ms(ours), "ms", baseline=("BackendGenerator direct", ms(base)),
                              note="the baseline is BESSER 8.4.1's own generator called directly"))
        goal = {"library (5)": 500, "200 classes": 2000}.get(label)
        FIGURES.append(figure(f"Phase 1 output checks {label}", ms(checks), "ms", target=Target("<=", goal) if goal else None,
                              miss=CHECKS_MISS.get(label, "")))
    (b10, o10), (b200, o200) = medians["10 classes"], medians["200 classes"]
    print(f"   growth 10 -> 200 classes: baseline {(b200 - b10) / 190 * 1000:.2f} ms/class, "
          f"run_phase1 {(o200 - o10) / 190 * 1000:.2f} ms/class")


def bench_queries() -> None:
    from besser.spec_driven_agent.model_serializer import serialize_domain_model

    from kernel_ext.boundary import Executor, ToolCall
    from kernel_ext.model import build_index, synthetic_model
    from kernel_ext.model.views import describe_class, overview
    from kernel_ext.tools.base import ToolContext
    from kernel_ext.tools.registry import default_catalog

    model = synthetic_model(200)
    names = sorted(c.name for c in model.get_classes())
    executor = Executor(default_catalog(), ToolContext(services={"domain_model": model}))
    start = time.perf_counter()
    first = executor.execute_sync(ToolCall("c0", "query_class", {"name": names[0]}))
    cold = time.perf_counter() - start
    assert first.ok

    import asyncio

    async def run_calls() -> list[float]:
        times = []
        for i in range(QUERIES):
            t = time.perf_counter()
            result = await executor.execute(ToolCall(f"c{i}", "query_class", {"name": names[(i * 37) % len(names)]}))
            times.append(time.perf_counter() - t)
            assert result.ok
        return times

    tool_times = asyncio.run(run_calls())
    index = build_index(model)
    first_render = []
    for name in names:  # every class once on a fresh index: no memoised rendering
        t = time.perf_counter()
        describe_class(index, name)
        first_render.append(time.perf_counter() - t)
    direct = []
    for i in range(QUERIES):
        t = time.perf_counter()
        describe_class(index, names[(i * 37) % len(names)])
        direct.append(time.perf_counter() - t)
    whole = []
    for _ in range(20):
        t = time.perf_counter()
        serialize_domain_model(model)
        whole.append(time.perf_counter() - t)
    build = []
    for _ in range(10):
        t = time.perf_counter()
        build_index(model)
        build.append(time.perf_counter() - t)

    def p(samples: list[float], q: float) -> float:
        return statistics.quantiles(samples, n=100)[int(q) - 1] * 1000

    print("\n2. query_class on the 200-class model")
    print(f"   first call (builds the index)          {cold * 1000:8.2f} ms")
    print(f"   query_class via Executor   p50 {p(tool_times, 50):6.3f} ms  p95 {p(tool_times, 95):6.3f} ms  "
          f"(n={QUERIES}, target p50 <= 5 ms)")
    print(f"   describe_class, first render of each class  p50 {p(first_render, 50):6.3f} ms  p95 {p(first_render, 95):6.3f} ms")
    print(f"   describe_class direct      p50 {p(direct, 50):6.3f} ms  p95 {p(direct, 95):6.3f} ms")
    print(f"   build_index                {_figure(build)}")
    print(f"   baseline: BESSER serialize_domain_model (whole model) {_figure(whole)}")
    FIGURES.append(figure("query_class via Executor, 200 classes", [t * 1000 for t in tool_times], "ms",
                          baseline=("describe_class direct", [t * 1000 for t in direct]), target=Target("<=", 5),
                          besser=("serialize_domain_model, whole model", [t * 1000 for t in whole])))

    text = overview(index)
    serialized = json.dumps(serialize_domain_model(model))
    query = describe_class(index, "E013")[0]
    print("\n3. What the LLM is handed for 200 classes (tokens ~ chars/4)")
    print(f"   overview                          {len(text):7d} chars  ~{len(text) / 4:6.0f} tokens  (target < ~2,000)")
    print(f"   one query_class answer (E013)     {len(query):7d} chars  ~{len(query) / 4:6.0f} tokens")
    print(f"   baseline: BESSER whole-model JSON {len(serialized):7d} chars  ~{len(serialized) / 4:6.0f} tokens")
    FIGURES.append(figure("overview handed to the LLM, 200 classes", [len(text) / 4], "tokens~", target=Target("<", 2000),
                          besser=("whole-model JSON", len(serialized) / 4), note="tokens estimated as characters / 4"))


def bench_check_breakdown() -> None:
    import ast

    from kernel_ext.generation.appimport import IMPORT_PROGRAM, confined_import, scratch_dir, stage_files
    from kernel_ext.generation.checks import GENERATED_MAX_BYTES, check_files
    from kernel_ext.generation.registry import resolve_target
    from kernel_ext.generation.runner import generate
    from kernel_ext.pyparse import compile_source

    spec = resolve_target("fastapi_backend", frozenset({"domain"}))
    root = PurePosixPath(spec.check_root.strip("/"))
    ms = lambda values: [v * 1000 for v in values]  # noqa: E731
    for label, build in _models().items():
        if label not in ("library (5)", "200 classes"):
            continue
        files = generate(spec, {"domain": build(), "gui": None}).files
        sources = {p: b for p, b in files.items() if p.endswith(".py")}
        parts: dict[str, list[float]] = {k: [] for k in ("trees", "host", "disk", "stage", "start", "framework", "app", "exit",
                                                         "before", "now")}
        scratch = scratch_dir(sum(map(len, files.values())))
        for _ in range(CHECK_ROUNDS):
            start = time.perf_counter()
            for path, data in sources.items():
                ast.parse(data, path)
            parts["trees"].append(time.perf_counter() - start)
            start = time.perf_counter()
            check_files(files, spec.check_root, spec.entrypoint, import_app=False)
            parts["host"].append(time.perf_counter() - start)
            code = {p: compile_source(d.decode(), p, max_bytes=GENERATED_MAX_BYTES) for p, d in sources.items()}
            with tempfile.TemporaryDirectory(prefix="besser-bench-check-") as tmp:  # the copy on disk, as before
                start = time.perf_counter()
                stage_files(files, code, root, Path(tmp) / "app")
                parts["disk"].append(time.perf_counter() - start)
            for variant, program in (("before", _IMPORT_BEFORE), ("now", IMPORT_PROGRAM), ("timed", _timed(IMPORT_PROGRAM))):
                with tempfile.TemporaryDirectory(prefix="besser-bench-check-", dir=scratch) as tmp:
                    start = time.perf_counter()
                    stage_files(files, code, root, Path(tmp) / "app")
                    staged = time.perf_counter()
                    done = confined_import(Path(tmp), Path(tmp) / "app", spec.entrypoint, 120, None, program=program)
                    ended = time.time()
                    assert done.exit_code == 0, done.stderr.text[-600:]
                if variant == "timed":
                    t0, t1, t2 = map(float, done.stdout.text.split()[-3:])
                    launched = ended - (time.perf_counter() - staged)  # the host's wall clock when it asked for the sandbox
                    parts["stage"].append(staged - start)
                    parts["start"].append(t0 - launched)
                    parts["framework"].append(t1 - t0)
                    parts["app"].append(t2 - t1)
                    parts["exit"].append(ended - t2)
                else:
                    parts[variant].append(time.perf_counter() - staged)
        print(f"\n4. Checks breakdown, {label} ({len(sources)} Python files, {sum(map(len, sources.values())) // 1024} KiB)")
        print(f"   baseline: ast.parse of every file (the checks before)  {_figure(parts['trees'])}")
        print(f"   compile once + imports off bytecode (host)             {_figure(parts['host'])}")
        print(f"   staging: the copy on disk (before)                     {_figure(parts['disk'])}")
        print(f"   staging: files and their pyc into the copy ({scratch or 'disk'})  {_figure(parts['stage'])}")
        print(f"   sandbox start to the interpreter's first line          {_figure(parts['start'])}")
        print(f"   framework import (fastapi, sqlalchemy.orm, pydantic)   {_figure(parts['framework'])}")
        print(f"   the app's own modules                                  {_figure(parts['app'])}")
        print(f"   exit (os._exit) and sandbox teardown                   {_figure(parts['exit'])}")
        print(f"   sandboxed import: before (db on disk, full teardown)   {_figure(parts['before'])}")
        print(f"                     now                                  {_figure(parts['now'])}")
        FIGURES.append(figure(f"checks breakdown {label}: host syntax + imports", ms(parts["host"]), "ms",
                              baseline=("ast.parse of every file (before)", ms(parts["trees"]))))
        FIGURES.append(figure(f"checks breakdown {label}: sandboxed app import", ms(parts["now"]), "ms",
                              baseline=("db on disk, full teardown (before)", ms(parts["before"])),
                              note="since 2026-12 (H4) the throwaway database is in the sandbox's private tmpfs and the "
                                   "interpreter leaves by os._exit once the import is done"))
        FIGURES.append(figure(f"checks breakdown {label}: staging the copy", ms(parts["stage"]), "ms",
                              baseline=("the copy on disk (before)", ms(parts["disk"])),
                              note=f"since 2026-12 (H4) in {scratch or 'the default temporary folder'} (appimport.scratch_dir)"))
        for key, what in (("start", "sandbox start"),
                          ("framework", "framework import (what a pre-imported template would save)"),
                          ("app", "the app's own modules"), ("exit", "exit and teardown")):
            FIGURES.append(figure(f"checks breakdown {label}: {what}", ms(parts[key]), "ms"))


# The sandboxed program before 2026-12 (H4), kept as the breakdown's same-run baseline: the database
# on the copy's disk (the folder above the app), the interpreter torn down at exit.
_IMPORT_BEFORE = ("import os, sys; os.environ['DATABASE_URL'] = 'sqlite:///' + os.path.abspath('../phase1-check.db'); "
                  "sys.path.insert(0, '.'); import importlib; importlib.import_module(sys.argv[1])")


def _timed(program: str) -> str:
    """``program`` with wall-clock marks: its first line, after the framework's import, after the app's."""
    marked = program.replace("sys.stdout.flush()\n", "print(_t0, _t1, _t.time())\nsys.stdout.flush()\n", 1)
    assert marked != program, "the import program no longer flushes before it leaves"
    return "import time as _t\n_t0 = _t.time()\nimport fastapi, sqlalchemy.orm, pydantic\n_t1 = _t.time()\n" + marked


def bench_class_of_30() -> None:
    import threading

    from kernel_ext.generation import run_phase1
    from kernel_ext.model import build_library_model

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    def wave(cache: str) -> tuple[list[float], float]:
        os.environ["BESSER_PHASE1_CACHE"] = cache
        times: list[float] = []
        start = threading.Barrier(CLASS_SIZE)
        with tempfile.TemporaryDirectory() as tmp:
            def student(i: int) -> None:
                start.wait()
                t = time.perf_counter()
                run_phase1(build_library_model(), Path(tmp) / f"s{i}", "fastapi_backend")
                times.append(time.perf_counter() - t)

            before = cpu()
            threads = [threading.Thread(target=student, args=(i,)) for i in range(CLASS_SIZE)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return times, (cpu() - before) / CLASS_SIZE

    def p95(values: list[float]) -> float:
        return statistics.quantiles(values, n=100)[94]

    off, off_cpu = wave("off")
    with tempfile.TemporaryDirectory() as cache:
        on, on_cpu = wave(str(Path(cache) / "phase1"))
    os.environ["BESSER_PHASE1_CACHE"] = "off"
    print(f"\n5. A class of {CLASS_SIZE}, one model, Phase 1 at once")
    print(f"   baseline: cache off  p95 {p95(off):6.2f} s   CPU {off_cpu:5.2f} s per run")
    print(f"   cache on             p95 {p95(on):6.2f} s   CPU {on_cpu:5.2f} s per run")
    FIGURES.append(figure(f"class of {CLASS_SIZE}: Phase 1 p95, cache on", [p95(on)], "s", baseline=("cache off", [p95(off)])))
    FIGURES.append(figure(f"class of {CLASS_SIZE}: Phase 1 CPU per run, cache on", [on_cpu], "s", baseline=("cache off", [off_cpu]),
                          note="CPU of this process and the sandboxes it waited for, per run"))


def main() -> None:
    bench_phase1()
    bench_queries()
    bench_check_breakdown()
    bench_class_of_30()
    emit(FIGURES)


if __name__ == "__main__":
    main()
