"""A tiny auth API that echoes credentials back (test fixture: redaction and cookies)."""

import hashlib

from disguises import FORMS, disguise
from fastapi import FastAPI, Header, HTTPException, Request, Response
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

app = FastAPI(title="Echo")
USERS: dict[str, str] = {}
TOKENS: dict[str, str] = {}
SESSIONS: dict[str, str] = {}


def issued_token(username: str, password: str) -> str:
    """Deterministic, so a test can look for the exact value in everything it was shown."""
    return "tok-" + hashlib.sha256(f"{username}:{password}".encode()).hexdigest()[:32]


def issued_session(username: str) -> str:
    return "sess-" + hashlib.sha256(f"session:{username}".encode()).hexdigest()[:32]


class Credentials(BaseModel):
    username: str
    password: str


@app.post("/register", status_code=201)
def register(body: Credentials):
    if body.username in USERS:
        raise HTTPException(status_code=409, detail="taken")
    USERS[body.username] = body.password
    return {"username": body.username}


@app.post("/login")
def login(body: Credentials, response: Response):
    if USERS.get(body.username) != body.password:
        raise HTTPException(status_code=401, detail="bad credentials")
    token = issued_token(body.username, body.password)
    session = issued_session(body.username)
    TOKENS[token] = body.username
    SESSIONS[session] = body.username
    response.set_cookie("session", session, httponly=True)
    return {"access_token": token, "token_type": "bearer"}


@app.get("/me")
def me(response: Response, authorization: str = Header(default="")):
    token = authorization.removeprefix("Bearer ").strip()
    if token not in TOKENS:
        raise HTTPException(status_code=401, detail=f"unknown token {token}")
    response.headers["X-Echo-Auth"] = authorization
    return {"username": TOKENS[token], "you_sent": authorization, "note": f"token was {token}"}


@app.get("/whoami")
def whoami(request: Request):
    session = request.cookies.get("session", "")
    if session not in SESSIONS:
        raise HTTPException(status_code=401, detail="no session")
    return {"username": SESSIONS[session]}


@app.get("/echo")
def echo(request: Request):
    return {"headers": dict(request.headers)}


@app.get("/count")
def count():
    return {"users": len(USERS)}


@app.get("/crash")
def crash(authorization: str = Header(default="")):
    print(f"debug: handling a request with {authorization}", flush=True)
    raise RuntimeError(f"boom while handling {authorization}")


@app.get("/pad")
def pad(n: int, authorization: str = Header(default="")):
    """A long body with the credential where the report cuts bodies (about 4000 characters)."""
    return {"pad": "x" * n, "auth": authorization, "tail": "y" * 200}


@app.get("/disguised")
def disguised(form: str, authorization: str = Header(default="")):
    """The caller's token written so that no run of it shows: in the body, a header and the log."""
    token = authorization.removeprefix("Bearer ").strip()
    if token not in TOKENS or form not in FORMS:
        raise HTTPException(status_code=401, detail="no token")
    shown = disguise(token, form)
    print(f"debug: issued {shown}", flush=True)
    return PlainTextResponse(shown, headers={"X-Token-Shown": shown.encode("ascii", "backslashreplace").decode()})
