"""BESSER's generators as declared targets: options (BESSER's own argument names), the models
each needs, the workspace folder it writes, and the call that runs it.

Each ``produce`` calls one BESSER generator class, unchanged, into an empty directory; the
caller publishes what it wrote. A target whose generator starts processes is ``confined``: the
runner runs it in a sandbox (``confined.py``) instead of calling ``produce`` in-process.
Options models are plain pydantic (extra fields refused, frozen) so the tool layer can reuse
them as argument schemas. Signatures and outputs are those of BESSER 8.4.1
(see the reference notes); React and web-app need a GUI model.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
DEFAULT_HTTP_METHODS: tuple[HttpMethod, ...] = ("GET", "POST", "PUT", "DELETE")
Dbms = Literal["sqlite", "postgresql", "mysql", "mssql", "mariadb", "oracle"]
_IDENT = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoOptions(Options):
    pass


class BackendOptions(Options):
    http_methods: list[HttpMethod] = Field(
        default_factory=lambda: list(DEFAULT_HTTP_METHODS), min_length=1, max_length=5,
        description="HTTP methods to generate routes for",
    )
    nested_creations: bool = Field(False, description="accept nested objects when creating an entity")


class SQLAlchemyOptions(Options):
    dbms: Dbms = Field("sqlite", description="database the models target")


class PydanticOptions(Options):
    backend: bool = Field(False, description="generate the variant used by a backend (create/update schemas)")
    nested_creations: bool = Field(False, description="allow nested objects in creation schemas")


class RestApiOptions(Options):
    http_methods: list[HttpMethod] = Field(default_factory=lambda: list(DEFAULT_HTTP_METHODS), min_length=1, max_length=5)
    nested_creations: bool = False


class SQLOptions(Options):
    sql_dialect: Dbms = Field("sqlite", description="SQL dialect of the DDL")
    ocl_check_constraints: bool = Field(True, description="turn simple OCL invariants into CHECK constraints")


class JSONSchemaOptions(Options):
    mode: Literal["regular", "smart_data"] = "regular"


class JavaOptions(Options):
    package_name: str | None = Field(None, pattern=r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$", max_length=120)


class SupabaseOptions(Options):
    user_root: str = Field("User", pattern=_IDENT, description="the class that represents users")


class DjangoOptions(Options):
    project_name: str = Field("myproject", pattern=_IDENT)
    app_name: str = Field("myapp", pattern=_IDENT)


Produce = Callable[[dict[str, Any], Path, Any], None]


@dataclass(frozen=True)
class GeneratorSpec:
    """One generation target. ``needs`` are model kinds (``domain``, ``gui``)."""

    name: str
    label: str
    description: str
    options: type[Options]
    needs: frozenset[str]
    subdir: str
    produce: Produce
    kind: str = "besser"  # besser | metadata
    stack: tuple[str, ...] = ()
    entrypoint: str | None = None  # module whose import proves the app boots
    bundles: frozenset[str] = frozenset()  # other targets this one already contains
    needs_executable: str | None = None
    app_root: str | None = None  # where the entry module lives, when not ``subdir`` itself
    # BESSER's generator starts processes (running model-derived code): it runs whole in a
    # one-off sandbox (``confined.py``), never in the host process.
    confined: bool = False
    # The same model and options give the same bytes (Phase 1's cache keeps only such output;
    # tests/test_phase1_cache.py generates each one twice); supabase stamps the time into its migration
    deterministic: bool = True

    @property
    def check_root(self) -> str:
        return self.subdir if self.app_root is None else self.app_root

    @property
    def tool_name(self) -> str:
        return f"generate_{self.name}"

    def missing(self, present: frozenset[str] | set[str]) -> list[str]:
        return sorted(self.needs - set(present))

    def unavailable_reason(self, present: frozenset[str] | set[str]) -> str | None:
        missing = self.missing(present)
        if missing:
            return f"{self.name} needs a {' and a '.join(missing)} model"
        if self.needs_executable and shutil.which(self.needs_executable) is None:
            return f"{self.name} needs {self.needs_executable!r} on PATH"
        return None


# -- the calls ------------------------------------------------------------------------------


def _backend(models: dict[str, Any], out: Path, o: BackendOptions) -> None:
    from besser.generators.backend import BackendGenerator

    BackendGenerator(model=models["domain"], http_methods=list(o.http_methods), nested_creations=o.nested_creations,
                     output_dir=str(out)).generate()


def _sqlalchemy(models: dict[str, Any], out: Path, o: SQLAlchemyOptions) -> None:
    from besser.generators.sql_alchemy import SQLAlchemyGenerator

    SQLAlchemyGenerator(model=models["domain"], output_dir=str(out)).generate(dbms=o.dbms)


def _pydantic(models: dict[str, Any], out: Path, o: PydanticOptions) -> None:
    from besser.generators.pydantic_classes import PydanticGenerator

    PydanticGenerator(model=models["domain"], backend=o.backend, nested_creations=o.nested_creations, output_dir=str(out)).generate()


def _rest_api(models: dict[str, Any], out: Path, o: RestApiOptions) -> None:
    from besser.generators.rest_api import RESTAPIGenerator

    RESTAPIGenerator(model=models["domain"], http_methods=list(o.http_methods), nested_creations=o.nested_creations,
                     output_dir=str(out)).generate()


def _sql(models: dict[str, Any], out: Path, o: SQLOptions) -> None:
    from besser.generators.sql import SQLGenerator

    SQLGenerator(model=models["domain"], output_dir=str(out), sql_dialect=o.sql_dialect,
                 ocl_check_constraints=o.ocl_check_constraints).generate()


def _json_schema(models: dict[str, Any], out: Path, o: JSONSchemaOptions) -> None:
    from besser.generators.json import JSONSchemaGenerator

    JSONSchemaGenerator(model=models["domain"], output_dir=str(out), mode=o.mode).generate()


def _python(models: dict[str, Any], out: Path, o: NoOptions) -> None:
    from besser.generators.python_classes import PythonGenerator

    PythonGenerator(model=models["domain"], output_dir=str(out)).generate()


def _java(models: dict[str, Any], out: Path, o: JavaOptions) -> None:
    from besser.generators.java_classes import JavaGenerator

    JavaGenerator(model=models["domain"], output_dir=str(out), package_name=o.package_name).generate()


def _rdf(models: dict[str, Any], out: Path, o: NoOptions) -> None:
    from besser.generators.rdf import RDFGenerator

    RDFGenerator(model=models["domain"], output_dir=str(out)).generate()


def _supabase(models: dict[str, Any], out: Path, o: SupabaseOptions) -> None:
    from besser.generators.supabase.supabase_generator import SupabaseGenerator

    SupabaseGenerator(model=models["domain"], output_dir=str(out), user_root=o.user_root).generate()


def _django(models: dict[str, Any], out: Path, o: DjangoOptions) -> None:
    from besser.generators.django import DjangoGenerator

    DjangoGenerator(model=models["domain"], project_name=o.project_name, app_name=o.app_name,
                    gui_model=models.get("gui"), output_dir=str(out)).generate()


def _react(models: dict[str, Any], out: Path, o: NoOptions) -> None:
    from besser.generators.react import ReactGenerator

    ReactGenerator(model=models["domain"], gui_model=models["gui"], output_dir=str(out)).generate()


def _web_app(models: dict[str, Any], out: Path, o: NoOptions) -> None:
    from besser.generators.web_app import WebAppGenerator

    WebAppGenerator(model=models["domain"], gui_model=models["gui"], output_dir=str(out)).generate()


_DOMAIN = frozenset({"domain"})
_DOMAIN_GUI = frozenset({"domain", "gui"})
_BACKEND_PARTS = frozenset({"pydantic", "sqlalchemy", "rest_api", "json_schema", "sql"})

BESSER_TARGETS: tuple[GeneratorSpec, ...] = (
    GeneratorSpec("fastapi_backend", "FastAPI backend",
                  "A complete FastAPI backend: SQLAlchemy models, Pydantic schemas, CRUD and relationship routers, "
                  "method endpoints, OCL invariants as validators (main_api.py, requirements.txt).",
                  BackendOptions, _DOMAIN, "backend", _backend, stack=("python", "fastapi", "sqlalchemy", "backend"),
                  entrypoint="main_api", bundles=_BACKEND_PARTS),
    GeneratorSpec("sqlalchemy", "SQLAlchemy models", "SQLAlchemy ORM models for the domain (sql_alchemy.py).",
                  SQLAlchemyOptions, _DOMAIN, "sqlalchemy", _sqlalchemy, stack=("python", "sqlalchemy")),
    GeneratorSpec("pydantic", "Pydantic classes", "Pydantic classes for the domain (pydantic_classes.py).",
                  PydanticOptions, _DOMAIN, "pydantic", _pydantic, stack=("python", "pydantic")),
    GeneratorSpec("rest_api", "REST API (FastAPI, in memory)",
                  "A single-file FastAPI REST API over in-memory data (rest_api.py, pydantic_classes.py).",
                  RestApiOptions, _DOMAIN, "rest_api", _rest_api, stack=("python", "fastapi", "backend"),
                  entrypoint="rest_api", bundles=frozenset({"pydantic"})),
    GeneratorSpec("sql", "SQL DDL", "CREATE TABLE statements for the domain (tables_<dialect>.sql).",
                  SQLOptions, _DOMAIN, "sql", _sql, stack=("sql",), confined=True),
    GeneratorSpec("json_schema", "JSON Schema", "A JSON Schema of the domain (json_schema.json).",
                  JSONSchemaOptions, _DOMAIN, "json_schema", _json_schema, stack=("json",)),
    GeneratorSpec("python_classes", "Python classes", "Plain Python classes for the domain (classes.py).",
                  NoOptions, _DOMAIN, "python", _python, stack=("python",)),
    GeneratorSpec("java_classes", "Java classes", "One Java class per domain class and enumeration.",
                  JavaOptions, _DOMAIN, "java", _java, stack=("java",)),
    GeneratorSpec("rdf", "RDF vocabulary", "An RDF/Turtle vocabulary of the domain (vocabulary.ttl).",
                  NoOptions, _DOMAIN, "rdf", _rdf, stack=("rdf",)),
    GeneratorSpec("supabase", "Supabase schema", "A Supabase SQL migration for the domain.",
                  SupabaseOptions, _DOMAIN, "supabase", _supabase, stack=("sql", "supabase"), deterministic=False),
    GeneratorSpec("django", "Django project", "A Django project with models, admin and views for the domain.",
                  DjangoOptions, _DOMAIN, "django", _django, stack=("python", "django", "backend"),
                  bundles=frozenset({"pydantic", "sqlalchemy", "json_schema", "sql"}), needs_executable="django-admin",
                  confined=True),
    GeneratorSpec("react", "React frontend", "A React (Vite) frontend built from the domain and GUI models.",
                  NoOptions, _DOMAIN_GUI, "frontend", _react, stack=("react", "frontend", "typescript")),
    GeneratorSpec("web_app", "Web application", "A full web application (React frontend + FastAPI backend) "
                  "from the domain and GUI models.", NoOptions, _DOMAIN_GUI, "web_app", _web_app,
                  stack=("react", "fastapi", "frontend", "backend"), bundles=_BACKEND_PARTS | {"fastapi_backend", "react"},
                  entrypoint="main_api", app_root="web_app/backend"),
)
