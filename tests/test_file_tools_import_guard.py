"""The import guard on BESSER-generated sql_alchemy.py and pydantic_classes.py (real generators)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from file_tool_helpers import Harness

from kernel_ext.errors import ErrorCode
from kernel_ext.tools.import_guard import ImportChecker


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    from besser.BUML.metamodel.structural import (
        BinaryAssociation,
        Class,
        DomainModel,
        IntegerType,
        Multiplicity,
        Property,
        StringType,
    )  # fmt: skip
    from besser.generators.pydantic_classes import PydanticGenerator
    from besser.generators.sql_alchemy import SQLAlchemyGenerator

    author = Class(name="Author", attributes={Property(name="name", type=StringType)})
    book = Class(name="Book", attributes={Property(name="title", type=StringType), Property(name="pages", type=IntegerType)})
    writes = BinaryAssociation(name="Writes", ends={
        Property(name="authors", type=author, multiplicity=Multiplicity(1, "*")),
        Property(name="books", type=book, multiplicity=Multiplicity(0, "*")),
    })  # fmt: skip
    model = DomainModel(name="Library", types={author, book}, associations={writes})
    out = tmp_path_factory.mktemp("generated")
    SQLAlchemyGenerator(model, output_dir=str(out)).generate(dbms="sqlite")
    PydanticGenerator(model, output_dir=str(out)).generate()
    assert (out / "sql_alchemy.py").is_file() and (out / "pydantic_classes.py").is_file()
    return out


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    instance = ImportChecker(str(tmp_path_factory.getbasetemp()), timeout=5.0)  # every test's project lies below
    yield instance
    instance.close()


@pytest.fixture
def project(tmp_path: Path, generated: Path) -> Path:
    root = tmp_path / "backend"
    shutil.copytree(generated, root)
    return root


def harness(root: Path, checker: ImportChecker) -> Harness:
    h = Harness(root)
    h.context.services["import_checker"] = checker
    return h


def test_an_edit_that_breaks_the_orm_import_is_refused(project, checker):
    h = harness(project, checker)
    result = h.refused(ErrorCode.BREAKS_IMPORT, "modify_file", path="sql_alchemy.py",
                       old_text="class Base(DeclarativeBase):", new_text="class Base(DeclarativeBas):")
    assert "NameError" in result.observation and "DeclarativeBas" in result.data["import_error"]
    read_id = h.read("sql_alchemy.py")
    line = next(n for n, text in enumerate((project / "sql_alchemy.py").read_text().splitlines(), 1) if text.startswith("class Book"))
    h.refused(ErrorCode.BREAKS_IMPORT, "replace_file_lines", path="sql_alchemy.py", read_id=read_id,
              start_line=line, end_line=line, new_text="class Book(MissingBase):")


def test_a_valid_orm_edit_passes_the_guard(project, checker):
    h = harness(project, checker)
    text = (project / "sql_alchemy.py").read_text()
    anchor = next(line for line in text.splitlines() if "title" in line and "mapped_column" in line)
    result = h.call("modify_file", path="sql_alchemy.py", old_text=anchor, new_text=anchor.replace("100", "250"))
    assert result.ok, result.observation
    assert "250" in (project / "sql_alchemy.py").read_text()


def test_pydantic_module_is_guarded_too(project, checker):
    h = harness(project, checker)
    h.read("pydantic_classes.py")
    h.refused(ErrorCode.BREAKS_IMPORT, "modify_file", path="pydantic_classes.py",
              old_text="class Book(BaseModel):", new_text="class Book(BaseModle):")
    content = (project / "pydantic_classes.py").read_text() + "\nraise RuntimeError('boom at import')\n"
    h.refused(ErrorCode.BREAKS_IMPORT, "write_file", path="pydantic_classes.py", content=content)


def test_a_module_that_already_failed_may_be_edited(project, checker):
    path = project / "sql_alchemy.py"
    path.write_text(path.read_text() + "\nundefined_name_at_the_end\n")
    h = harness(project, checker)
    result = h.call("modify_file", path="sql_alchemy.py", old_text="class Base(DeclarativeBase):", new_text="class Base(DeclarativeBase):  # base")
    assert result.ok and "failed before this edit too" in result.observation


def test_a_hanging_import_is_stopped_and_refused(project):
    quick = ImportChecker(str(project), timeout=1.0)
    try:
        h = harness(project, quick)
        h.read("sql_alchemy.py")
        content = (project / "sql_alchemy.py").read_text() + "\nwhile True:\n    pass\n"
        result = h.refused(ErrorCode.BREAKS_IMPORT, "write_file", path="sql_alchemy.py", content=content)
        assert result.data["timed_out"] is True
    finally:
        quick.close()


def test_an_unavailable_checker_fails_closed(project):
    broken = ImportChecker(str(project), python=str(project / "no-such-python"))
    h = harness(project, broken)
    h.refused(ErrorCode.CHECKER_UNAVAILABLE, "modify_file", path="sql_alchemy.py",
              old_text="class Base(DeclarativeBase):", new_text="class Base(DeclarativeBase):  # base")


def test_no_sandbox_means_no_check_and_a_refused_edit(project):
    """A policy no tier satisfies (here an unknown one): the worker never starts unconfined; guarded edits are refused."""
    unconfinable = ImportChecker(str(project), policy="no-such-tier")
    try:
        unconfinable.warm()  # must not raise: the next check reports it
        h = harness(project, unconfinable)
        result = h.refused(ErrorCode.CHECKER_UNAVAILABLE, "modify_file", path="sql_alchemy.py",
                           old_text="class Base(DeclarativeBase):", new_text="class Base(DeclarativeBase):  # base")
        assert "sandbox is unavailable" in result.observation and unconfinable.tier == ""
    finally:
        unconfinable.close()


def test_checked_modules_see_no_secrets_and_write_nothing(tmp_path, checker, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000")
    fresh = ImportChecker(str(tmp_path))  # started after the variable was set
    try:
        probe = "import os\nassert 'OPENAI_API_KEY' not in os.environ, 'leaked'\nimport json\n"
        verdict = fresh.check(probe, str(tmp_path / "sql_alchemy.py"))
        assert verdict.ok, verdict.error
    finally:
        fresh.close()
    assert list(tmp_path.iterdir()) == []  # no __pycache__, nothing written


def test_package_relative_imports_resolve(tmp_path, checker):
    pkg = tmp_path / "app"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "database.py").write_text("URL = 'sqlite://'\n")
    verdict = checker.check("from .database import URL\nassert URL\n", str(pkg / "sql_alchemy.py"))
    assert verdict.ok, verdict.error
    bad = checker.check("from .databse import URL\n", str(pkg / "sql_alchemy.py"))
    assert not bad.ok and "databse" in bad.error


def test_worker_survives_a_module_that_kills_its_process(tmp_path, checker):
    died = checker.check("import os\nos._exit(0)\n", str(tmp_path / "sql_alchemy.py"))
    assert not died.ok and "died" in died.error
    assert checker.check("x = 1\n", str(tmp_path / "sql_alchemy.py")).ok
    assert sys.executable  # the host process is untouched
