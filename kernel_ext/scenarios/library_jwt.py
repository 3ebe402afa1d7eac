'''The seed's example, authored: the Library model, "a FastAPI backend with JWT auth and a Dockerfile".

This is a *scripted* provider (labelled ``scripted:library-jwt``), not a model: its turns are
written by hand to show a whole run offline. It plans three tasks, writes ``deps.py`` and
``auth.py`` (with a deliberate ``SECRET_KEY`` used without import), wires the router into
``main_api.py``, adds a Dockerfile and pins requirements, cites evidence and finishes. Phase 3's
F821 blocker catches the bug; the repair round fixes the import and proves the flow with a
``test_api`` scenario (register, log in, call a protected route with the bearer token).

``python -m kernel_ext demo --record`` re-records the shipped cassette from this script.
'''

from __future__ import annotations

from pathlib import Path

from kernel_ext.providers.scripted import Script, Turn, call

REQUEST = "Generate a FastAPI backend for this model with JWT authentication and a Dockerfile"
CASSETTE = Path(__file__).with_name("data") / "library-jwt.cassette.jsonl"

DEPS = '''"""JWT helpers and the current-user dependency (HS256, standard library only)."""
import base64
import hashlib
import hmac
import json
import os
import time

from fastapi import Header, HTTPException, status

SECRET_KEY = os.environ.get("JWT_SECRET_KEY", "change-me-in-production")
TOKEN_SECONDS = 3600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode_token(claims: dict, key: str) -> str:
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps({**claims, "exp": int(time.time()) + TOKEN_SECONDS}).encode())
    signature = hmac.new(key.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


def decode_token(token: str, key: str) -> dict:
    try:
        header, body, signature = token.split(".")
    except ValueError:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "malformed token")
    expected = hmac.new(key.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(expected, _unb64(signature)):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "bad signature")
    claims = json.loads(_unb64(body))
    if claims.get("exp", 0) < time.time():
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "token expired")
    return claims


def get_current_user(authorization: str = Header(default="")) -> str:
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing bearer token")
    return decode_token(token, SECRET_KEY)["sub"]
'''

AUTH = '''"""Registration, login and a protected route."""
import hashlib
import hmac
import os

from fastapi import APIRouter, Depends, HTTPException, status
from pydantic import BaseModel

from deps import encode_token, get_current_user

router = APIRouter(prefix="/auth", tags=["Auth"])
_USERS: dict[str, tuple[bytes, bytes]] = {}


class Credentials(BaseModel):
    username: str
    password: str


def _hash(password: str, salt: bytes) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 100_000)


@router.post("/register", status_code=status.HTTP_201_CREATED)
def register(credentials: Credentials) -> dict:
    if credentials.username in _USERS:
        raise HTTPException(status.HTTP_409_CONFLICT, "username taken")
    salt = os.urandom(16)
    _USERS[credentials.username] = (salt, _hash(credentials.password, salt))
    return {"username": credentials.username}


@router.post("/login")
def login(credentials: Credentials) -> dict:
    stored = _USERS.get(credentials.username)
    if stored is None or not hmac.compare_digest(stored[1], _hash(credentials.password, stored[0])):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong username or password")
    token = encode_token({"sub": credentials.username}, SECRET_KEY)
    return {"access_token": token, "token_type": "bearer"}


@router.get("/me")
def me(user: str = Depends(get_current_user)) -> dict:
    return {"username": user}
'''

DOCKERFILE = '''FROM python:3.11-slim
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
ENV JWT_SECRET_KEY=change-me-in-production
EXPOSE 8000
CMD ["uvicorn", "main_api:app", "--host", "0.0.0.0", "--port", "8000"]
'''

REQUIREMENTS = '''fastapi>=0.103.0
uvicorn>=0.15.0
pydantic>=2.0.0
typing-extensions>=4.6.0
sqlalchemy>=2.0.0,<3.0
python-multipart>=0.0.6
'''

LOGIN_FLOW = [
    {"method": "POST", "path": "/auth/register", "json": {"username": "ada", "password": "correct horse"}, "expected_status": 201},
    {"method": "POST", "path": "/auth/login", "json": {"username": "ada", "password": "correct horse"}, "expected_status": 200},
    {"method": "GET", "path": "/auth/me", "headers": {"Authorization": "Bearer {{1.access_token}}"}, "expected_status": 200,
     "expected_fields": {"username": "ada"}},
    {"method": "GET", "path": "/auth/me", "expected_status": 401},
]


def script() -> Script:
    return Script.of("library-jwt", [
        # gap: the planning call
        Turn("", (call("submit_tasks", {"tasks": [
            "Add JWT authentication: register, login and a protected route",
            "Add a Dockerfile for the backend",
            "Pin the backend requirements",
        ]}),)),
        # Phase 2
        Turn("I will add the JWT helpers and the auth router.", (
            call("write_file", {"path": "backend/deps.py", "content": DEPS}),
            call("write_file", {"path": "backend/auth.py", "content": AUTH}),
        )),
        Turn("Now wire the router into the app.", (
            call("modify_file", {"path": "backend/main_api.py",
                                 "old_text": "from routers import author as author_router\n",
                                 "new_text": "from routers import author as author_router\nfrom auth import router as auth_router\n"}),
            call("modify_file", {"path": "backend/main_api.py",
                                 "old_text": "# Enable CORS for all origins (for development)\n",
                                 "new_text": "app.include_router(auth_router)\n\n# Enable CORS for all origins (for development)\n"}),
        )),
        Turn("A Dockerfile, and the requirements file read before rewriting it.", (
            call("write_file", {"path": "backend/Dockerfile", "content": DOCKERFILE}),
            call("read_file", {"path": "backend/requirements.txt"}),
        )),
        Turn("", (call("write_file", {"path": "backend/requirements.txt", "content": REQUIREMENTS}),)),
        Turn("Recording evidence for the checklist.", (call("task_list", {
            "action": "done", "ids": ["T1", "T2", "T3"],
            "evidence": [
                {"id": "T1", "path": "backend/auth.py", "quote": "token = encode_token({\"sub\": credentials.username}, SECRET_KEY)"},
                {"id": "T2", "path": "backend/Dockerfile",
                 "quote": "CMD [\"uvicorn\", \"main_api:app\", \"--host\", \"0.0.0.0\", \"--port\", \"8000\"]"},
                {"id": "T3", "path": "backend/requirements.txt", "quote": "sqlalchemy>=2.0.0,<3.0"},
            ],
        }),)),
        Turn("JWT authentication and a Dockerfile are in place."),
        # Phase 3, repair round 1: the F821 blocker
        Turn("SECRET_KEY is used in auth.py without being imported; importing it from deps.", (
            call("modify_file", {"path": "backend/auth.py",
                                 "old_text": "from deps import encode_token, get_current_user\n",
                                 "new_text": "from deps import SECRET_KEY, encode_token, get_current_user\n"}),
        )),
        Turn("Proving the login flow end to end.", (
            call("test_api", {"action": "run", "scenario_id": "jwt-login-flow", "name": "register, log in, call /auth/me",
                              "requests": LOGIN_FLOW}),
        )),
        Turn("Fixed: the login flow passes with the bearer token."),
    ])
