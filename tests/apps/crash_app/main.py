"""Fails while it is imported (test fixture: a start-up failure is a blocker)."""

from fastapi import FastAPI

app = FastAPI(title="Crash")
settings = load_settings()  # noqa: F821 - on purpose: this name does not exist


@app.get("/")
def root():
    return {"ok": True}
