"""Inside the sandbox: what the app host loads once so every forked child starts warm.

``preload`` imports the libraries generated backends use (FastAPI, Starlette, pydantic,
SQLAlchemy with its SQLite dialect, httpx, and optional auth helpers when installed).
``exercise`` then runs a tiny app of the same shape through the same paths a scenario takes
(SQLite engine and session, ORM model with a relationship, a request model with a validator,
dependencies, middleware, an exception handler, the OpenAPI schema, the in-process transport),
so lazy imports and first-use caches are paid here, once, and inherited by each child.
"""

# No ``from __future__ import annotations`` here: FastAPI and SQLAlchemy read the warm-up
# app's annotations at run time, and its classes are local to a function.
import asyncio
import importlib
import os
import shutil
import tempfile
import time

LIBRARIES = (
    "sqlite3", "json", "decimal", "uuid", "enum", "datetime", "logging",
    "pydantic", "pydantic_core", "pydantic.networks",
    "sqlalchemy", "sqlalchemy.orm", "sqlalchemy.ext.declarative", "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.sqlite.pysqlite", "sqlalchemy.sql.default_comparator",
    "starlette", "starlette.applications", "starlette.middleware.cors", "starlette.responses",
    "fastapi", "fastapi.routing", "fastapi.encoders", "fastapi.responses", "fastapi.middleware.cors",
    "fastapi.security", "fastapi.staticfiles", "fastapi.exceptions",
    "anyio", "anyio._backends._asyncio", "httpx",
    "kernel_ext.secrets", "kernel_ext.validation.apphost.exchange", "kernel_ext.validation.apphost.probe",
)
OPTIONAL = ("email_validator", "multipart", "python_multipart", "jwt", "jose", "passlib.context", "bcrypt", "dateutil.parser")


def preload() -> tuple[list[str], float]:
    """Import what is available; returns (imported names, milliseconds)."""
    started = time.perf_counter()
    done = []
    for name in (*LIBRARIES, *OPTIONAL):
        try:
            importlib.import_module(name)
            done.append(name)
        except Exception:  # noqa: BLE001, S112 - optional helpers may be missing or broken
            continue
    return done, (time.perf_counter() - started) * 1000


def exercise() -> float:
    """Run the warm-up app once; returns milliseconds."""
    started = time.perf_counter()
    scratch = tempfile.mkdtemp(prefix="apphost-warmup-")
    try:
        asyncio.run(_exercise(os.path.join(scratch, "warm.db")))
    except Exception:  # noqa: BLE001, S110 - warming is best effort, children still work cold
        pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return (time.perf_counter() - started) * 1000


async def _exercise(db_path: str) -> None:
    import httpx
    from fastapi import Depends, FastAPI, HTTPException, Request
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, field_validator
    from sqlalchemy import ForeignKey, String, create_engine
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, sessionmaker

    class Base(DeclarativeBase):
        pass

    class Shelf(Base):
        __tablename__ = "shelf"
        id: Mapped[int] = mapped_column(primary_key=True)
        name: Mapped[str] = mapped_column(String(50))
        items: Mapped[list["Item"]] = relationship(back_populates="shelf")

    class Item(Base):
        __tablename__ = "item"
        id: Mapped[int] = mapped_column(primary_key=True)
        title: Mapped[str] = mapped_column(String(50))
        shelf_id: Mapped[int] = mapped_column(ForeignKey("shelf.id"))
        shelf: Mapped[Shelf] = relationship(back_populates="items")

    engine = create_engine(f"sqlite:///{db_path}", connect_args={"check_same_thread": False})
    Base.metadata.create_all(engine)
    local = sessionmaker(bind=engine, autoflush=False)

    def get_db():
        db = local()
        try:
            yield db
        finally:
            db.close()

    class ItemIn(BaseModel):
        title: str
        shelf: int

        @field_validator("title")
        @classmethod
        def not_empty(cls, value: str) -> str:
            if not value:
                raise ValueError("empty")
            return value

    app = FastAPI()

    @app.middleware("http")
    async def passthrough(request: Request, call_next):
        return await call_next(request)

    @app.exception_handler(ValueError)
    async def on_value_error(request: Request, exc: ValueError):
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    @app.post("/shelf/")
    async def make_shelf(db: Session = Depends(get_db)) -> dict:  # noqa: B008 - the generated apps' idiom, warmed as they use it
        shelf = Shelf(name="s")
        db.add(shelf)
        db.commit()
        db.refresh(shelf)
        return {"shelf": shelf.__dict__ | {"_sa_instance_state": None}}

    @app.post("/item/")
    async def make_item(data: ItemIn, db: Session = Depends(get_db)):  # noqa: B008
        item = Item(title=data.title, shelf_id=data.shelf)
        db.add(item)
        db.commit()
        db.refresh(item)
        return item

    @app.get("/item/{item_id}/")
    def get_item(item_id: int, db: Session = Depends(get_db)):  # noqa: B008
        found = db.query(Item).filter(Item.id == item_id).first()
        if found is None:
            raise HTTPException(status_code=404, detail="no item")
        return {"item": found, "shelf": found.shelf}

    app.openapi()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as client:
        for _ in range(2):
            await client.post("/shelf/")
            await client.post("/item/", json={"title": "t", "shelf": 1})
            await client.post("/item/", json={"title": "", "shelf": 1})
            await client.get("/item/1/")
            await client.get("/item/99/")
            await client.put("/item/1/", json={})
    engine.dispose()
