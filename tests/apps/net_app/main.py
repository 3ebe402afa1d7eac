"""Tries to reach the outside world (test fixture: the sandbox has no network).

``/connect?host=H&port=P`` opens a TCP connection; ``/resolve?name=N`` resolves a name.
Each returns ``{"connected": bool, "error": str}``.
"""

import socket

from fastapi import FastAPI

app = FastAPI(title="Net")


@app.get("/connect")
def connect(host: str, port: int):
    try:
        with socket.create_connection((host, port), timeout=3) as conn:
            conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
            data = conn.recv(100)
        return {"connected": True, "error": "", "received": data.decode("latin-1")}
    except OSError as exc:
        return {"connected": False, "error": f"{type(exc).__name__}: {exc}"}


@app.get("/resolve")
def resolve(name: str):
    try:
        return {"connected": True, "error": "", "address": socket.gethostbyname(name)}
    except OSError as exc:
        return {"connected": False, "error": f"{type(exc).__name__}: {exc}"}


@app.get("/sleep")
def sleep(seconds: float):
    import time

    time.sleep(seconds)
    return {"slept": seconds}


@app.get("/exit")
def leave():
    import os

    os._exit(3)
