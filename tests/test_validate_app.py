# ruff: noqa: F811 - the host fixture imported from api_fixtures is requested by name
"""validate_app on BESSER's generated Library backend, clean and with the faults it must find.

Each fault is a small edit of the generated source (what an LLM edit could do): a name that
does not resolve (behind BESSER's star imports), a column the create schema cannot fill (an
entity that cannot be created), a method body that raises (an action that cannot run), a
broken relationship (mapper configuration), a syntax error. One sandboxed host serves the
module; the domain model (when given) comes from F5's Library example.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from api_fixtures import call, executor_for, host, library_workspace, requires_sandbox  # noqa: F401 - host is a fixture

from kernel_ext.model.examples import build_library_model
from kernel_ext.tools.base import RunState
from kernel_ext.validation.validate import validate_app

pytestmark = requires_sandbox


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return library_workspace(tmp_path_factory.mktemp("clean") / "project")


@pytest.fixture
def project(tmp_path):
    return library_workspace(tmp_path / "project")


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / "backend" / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, 1))


def codes(result) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in result.report.findings:
        out.setdefault(f.code, []).append(f)
    return out


def test_the_generated_library_backend_validates_clean(clean, host):
    result = validate_app(clean, model=build_library_model(), host=host)
    report = result.report
    assert report.blockers == () and report.boots is True and result.verified, result.to_text()
    created = {e["entity"]: e["verdict"] for e in result.entities}
    assert created == {"Person": "abstract", "Member": "created", "Library": "created", "Book": "created", "Author": "created"}
    actions = {f"{a['entity']}.{a['action']}": a["verdict"] for a in result.actions}
    assert actions == {"Person.display_name": "effective", "Book.is_long": "effective"}  # Person's runs on a subclass
    assert report.rank() == (0, 0, 0, 0) and not report.runtime_failure()


def test_without_a_model_entities_are_still_found_and_created(clean, host):
    result = validate_app(clean, host=host)
    assert result.report.blockers == () and result.report.cannot_create == ()
    assert {e["entity"] for e in result.entities if e["verdict"] == "created"} == {"Member", "Library", "Book", "Author"}


def test_the_tool_returns_the_report_as_data(clean, host):
    result = call(executor_for(clean, host, services={"domain_model": build_library_model()}), "validate_app", {})
    assert result.ok and result.data["verified"] and result.data["blocker_count"] == 0 and result.data["boots"] is True
    assert result.data["rank"] == [0, 0, 0, 0] and "validate_app: 0 blocker(s); the app starts" in result.observation


def test_an_undefined_name_behind_a_star_import_is_a_blocker(project, host):
    edit(project, "routers/book.py", "count = database.query(Book).count()", "count = database.query(Bok).count()")
    result = validate_app(project, host=host)
    found = codes(result)["undefined_name"]
    assert len(found) == 1 and found[0].severity == "blocker" and found[0].source == "ruff"
    assert found[0].path == "backend/routers/book.py" and found[0].line and "Bok" in found[0].message
    assert result.report.boots is True  # importing does not run the function: only the static check sees it
    assert "undefined_name" in result.to_html() and "Bok" in result.to_text()


def test_an_undefined_name_at_import_time_is_also_a_startup_failure(project, host):
    edit(project, "routers/author.py", "router = APIRouter()", "router = APIRouter(tags=missing_tags)")
    result = validate_app(project, host=host)
    found = codes(result)
    assert "missing_tags" in found["undefined_name"][0].message
    assert found["startup_failed"][0].path == "backend/routers/author.py" and result.report.boots is False
    assert result.report.rank()[0] == 1 and result.report.runtime_failure()


def test_an_entity_that_cannot_be_created_is_found(project, host):
    # A mandatory column the create schema does not offer: every insert violates NOT NULL.
    edit(project, "sql_alchemy.py", '    address: Mapped_[str] = mapped_column(String_(100))\n',
         '    address: Mapped_[str] = mapped_column(String_(100))\n    code: Mapped_[str] = mapped_column(String_(10))\n')
    result = validate_app(project, model=build_library_model(), host=host)
    report = result.report
    assert report.boots is True and "Library" in report.cannot_create and "Book" in report.cannot_create
    library = next(f for f in codes(result)["create_failed"] if "Library" in f.message)
    assert library.severity == "blocker" and "POST /library/" in library.message and "409" in library.message
    book = next(f for f in codes(result)["create_failed"] if "Book" in f.message)
    assert "needs Library" in book.message
    assert report.runtime_failure() and report.rank()[1] == 2


def test_an_action_that_cannot_run_is_found(project, host):
    edit(project, "routers/book_methods.py", "return _book_object.pages > threshold", "return _book_object.pages > threshold.limit")
    result = validate_app(project, model=build_library_model(), host=host)
    assert result.report.cannot_run == ("Book.is_long",) and result.report.cannot_create == ()
    failed = codes(result)["action_failed"][0]
    assert failed.severity == "blocker" and "has no attribute 'limit'" in failed.message


def test_a_broken_relationship_is_a_mapper_failure(project, host):
    edit(project, "sql_alchemy.py", 'relationship("Book", back_populates="borrower"', 'relationship("Bok", back_populates="borrower"')
    result = validate_app(project, host=host)
    assert result.report.boots is False and codes(result)["mapper_config"][0].severity == "blocker"


def test_a_syntax_error_is_a_blocker_and_the_app_does_not_start(project, host):
    edit(project, "routers/library.py", "router = APIRouter()", "router = APIRouter(")
    result = validate_app(project, host=host)
    found = codes(result)
    assert found["syntax_error"][0].path == "backend/routers/library.py" and found["syntax_error"][0].line
    assert "startup_failed" in found and result.report.boots is False


def test_results_are_cached_per_source_and_ranks_order_trees(project, host):
    state = RunState(run_id="f6-validate-cache")
    good = validate_app(project, state=state, host=host)
    jobs = host.submitted
    assert validate_app(project, state=state, host=host) is good and host.submitted == jobs
    edit(project, "routers/book_methods.py", "return _book_object.pages > threshold", "return _book_object.pages > threshold.limit")
    worse = validate_app(project, state=state, host=host)
    assert host.submitted == jobs + 1 and worse.report.rank() > good.report.rank()


async def test_phase3_ranks_and_repairs_with_the_same_check(project, host, tmp_path):
    """Phase 3 consumes validate_run's report: a broken action is repaired, the loop stops clean."""
    from kernel_ext.pipeline.phase3 import RoundOutcome, run_phase3
    from kernel_ext.tools.api_test import validate_run

    methods = project / "backend" / "routers" / "book_methods.py"
    good = methods.read_text()
    edit(project, "routers/book_methods.py", "return _book_object.pages > threshold", "return _book_object.pages > threshold.limit")
    ctx = executor_for(project, host, state=RunState(run_id="f6-phase3"),
                       services={"domain_model": build_library_model()}).context

    async def validate():
        import asyncio

        return (await asyncio.to_thread(validate_run, ctx)).report

    async def repair(report, round_no):
        assert [f.code for f in report.blockers] == ["action_failed"]
        methods.write_text(good)
        return RoundOutcome()

    result = await run_phase3(project, tmp_path / "snapshots", validate, repair)
    assert result.stop_reason == "no blockers left" and result.rounds == 1 and result.report.rank() == (0, 0, 0, 0)
    assert result.history[0][1] == (0, 0, 0, 0)


def test_a_workspace_without_a_fastapi_backend_is_not_an_error(tmp_path, host):
    (tmp_path / "frontend").mkdir()
    (tmp_path / "frontend" / "index.html").write_text("<html></html>")
    result = validate_app(tmp_path, host=host)
    assert result.report.boots is None and result.report.blockers == ()
    assert [f.code for f in result.report.findings] == ["no_backend"]


def test_the_probe_reads_the_models_ocl_ranges(tmp_path, host):
    """The clinic's OCL keeps duration_minutes in 10..120 (a validator the OpenAPI schema does not show):
    the create probe sends a value inside the range, so a clean scaffold has no create blocker."""
    from kernel_ext.eval.models import eval_model
    from kernel_ext.generation import run_phase1

    model = eval_model("clinic").load()
    run_phase1(model, tmp_path / "clinic", check=False)
    result = validate_app(tmp_path / "clinic", model=model, host=host)
    assert result.report.blockers == () and result.report.cannot_create == (), result.to_text()
    created = {e["entity"]: (e["verdict"], (e.get("payload") or {}).get("duration_minutes")) for e in result.entities}
    assert created["Appointment"] == ("created", 10), created


@pytest.mark.parametrize(("expression", "bounds"), [
    ("context A inv r: self.duration_minutes >= 10 and self.duration_minutes <= 120",
     {"duration_minutes": {"minimum": 10, "maximum": 120}}),
    ("self.pages > 0", {"pages": {"exclusiveMinimum": 0}}),
    ("0.5 <= self.price", {"price": {"minimum": 0.5}}),
    ("self.a > 0 or self.b > 0", {}),  # a disjunction sets no bound
    ("self.owner.age >= 18", {}),  # navigation: not this class's attribute
    ("not (self.a > 3)", {}),
])
def test_ocl_bounds_reads_only_conjunctions_of_comparisons(expression, bounds):
    from kernel_ext.validation.hints import ocl_bounds

    assert ocl_bounds(expression) == bounds
