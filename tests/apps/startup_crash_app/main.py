"""Imports fine; its start-up handler raises (test fixture)."""

from contextlib import asynccontextmanager

from fastapi import FastAPI


@asynccontextmanager
async def lifespan(app):
    raise RuntimeError("database migration failed at start-up")
    yield


app = FastAPI(title="StartupCrash", lifespan=lifespan)


@app.get("/")
def root():
    return {"ok": True}
