"""A LABELLED STAND-IN for LiteLLM's proxy, for the hub tests only: never shipped, never a product.

Why it exists: LiteLLM's proxy installs and runs here, but its virtual keys and budgets live in
its database, reached only through Prisma's query and schema engines, which are downloaded from
Prisma's own binary host at first use; that host cannot be reached from this machine (nor from
CI), and no package registry carries the engines (docs/jupyterhub.md, section 8, has the
commands and errors). So the hub test runs the hub's gateway service with this program in its
place, through the same managed-service slot (``BESSER_HUB_GATEWAY_CMD``) and the same
environment the real proxy gets.

What it copies from LiteLLM 1.108 (its wire, not its code): the admin routes the hub's hooks and
a teacher use (``/user/new`` 409 on a known user; ``/key/generate``; ``/key/delete`` by
``key_aliases``; ``/user/info``), the master key as admin credential, ``/health/liveliness``,
and ``/v1/chat/completions`` forwarded upstream with the operator's key, a user over budget
refused before forwarding with LiteLLM's own reply: HTTP 422, ``{"error": {"type":
"budget_exceeded", "message": "ExceededBudget: User=... over budget. Spend=..., Budget=...",
"param": null, "code": "422"}}``. Spend is counted from the reply's usage at LiteLLM's price for
gpt-4o-mini ($0.15 / $0.60 per million input / output tokens).

Run as ``python gateway_standin.py``; environment: ``GATEWAY_PORT``, ``LITELLM_MASTER_KEY``,
``OPENAI_API_KEY`` (the operator's), ``OPENAI_BASE_URL`` (the upstream).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

PRICE_IN, PRICE_OUT = 0.15e-6, 0.60e-6


class Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users: dict[str, dict[str, Any]] = {}  # user_id -> {"spend", "max_budget"}
        self.keys: dict[str, dict[str, Any]] = {}  # key -> {"user_id", "key_alias", "spend"}


def make_handler(store: Store, master: str, upstream: str, real_key: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            """One line per request, as LiteLLM's uvicorn writes it: what the test counts."""
            print(f'INFO:     {self.client_address[0]} - "{self.requestline}" {code}', file=sys.stderr, flush=True)

        def reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def error(self, status: int, message: str, kind: str) -> None:
            self.reply(status, {"error": {"message": message, "type": kind, "param": None, "code": str(status)}})

        def bearer(self) -> str:
            return self.headers.get("authorization", "").removeprefix("Bearer ").strip()

        def body(self) -> dict[str, Any]:
            length = int(self.headers.get("content-length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/health/liveliness":
                return self.reply(200, "I'm alive!")
            if self.bearer() != master:
                return self.error(401, "Authentication Error, invalid proxy admin key", "auth_error")
            if url.path == "/user/info":
                user_id = parse_qs(url.query).get("user_id", [""])[0]
                with store.lock:
                    user = store.users.get(user_id)
                    keys = [{"key_alias": k["key_alias"], "spend": k["spend"], "user_id": user_id}
                            for k in store.keys.values() if k["user_id"] == user_id]
                if user is None:
                    return self.error(404, f"User {user_id} not found", "not_found_error")
                return self.reply(200, {"user_id": user_id, "user_info": {"user_id": user_id, **user}, "keys": keys, "teams": []})
            return self.error(404, "Not Found", "not_found_error")

        def do_POST(self) -> None:
            path, body = urlsplit(self.path).path, self.body()
            if path in ("/v1/chat/completions", "/chat/completions"):
                return self.chat(body)
            if self.bearer() != master:
                return self.error(401, "Authentication Error, invalid proxy admin key", "auth_error")
            with store.lock:
                if path == "/user/new":
                    if body["user_id"] in store.users:
                        return self.reply(409, {"detail": {"error": f"User with user_id {body['user_id']} already exists"}})
                    store.users[body["user_id"]] = {"spend": 0.0, "max_budget": body.get("max_budget")}
                    return self.reply(200, {"user_id": body["user_id"], "max_budget": body.get("max_budget")})
                if path == "/key/delete":
                    gone = [k for k, v in store.keys.items() if v["key_alias"] in body.get("key_aliases", [])]
                    for key in gone:
                        del store.keys[key]
                    return self.reply(200, {"deleted_keys": len(gone)}) if gone else self.error(404, "no such key", "not_found_error")
                if path == "/key/generate":
                    key = "sk-" + secrets.token_urlsafe(16)
                    store.keys[key] = {"user_id": body.get("user_id"), "key_alias": body.get("key_alias"), "spend": 0.0}
                    return self.reply(200, {"key": key, "key_alias": body.get("key_alias"), "user_id": body.get("user_id")})
            return self.error(404, "Not Found", "not_found_error")

        def chat(self, body: dict[str, Any]) -> None:
            with store.lock:
                key = store.keys.get(self.bearer())
                user = store.users.get(key["user_id"]) if key else None
            if key is None or user is None:
                return self.error(401, "Authentication Error, Invalid proxy server token passed.", "auth_error")
            budget = user.get("max_budget")
            if budget is not None and user["spend"] >= budget:  # LiteLLM checks before the call
                message = f"ExceededBudget: User={key['user_id']} over budget. Spend={user['spend']}, Budget={budget}"
                return self.error(422, message, "budget_exceeded")
            answer = httpx.post(f"{upstream}/chat/completions", json=body, timeout=60,
                                headers={"authorization": f"Bearer {real_key}"}, trust_env=False)
            cost = 0.0
            for line in answer.text.splitlines():
                if line.startswith("data: {") and '"usage"' in line:
                    usage = json.loads(line[6:]).get("usage") or {}
                    cost = usage.get("prompt_tokens", 0) * PRICE_IN + usage.get("completion_tokens", 0) * PRICE_OUT
            with store.lock:
                user["spend"] += cost
                key["spend"] += cost
            data = answer.content
            self.send_response(answer.status_code)
            self.send_header("content-type", answer.headers.get("content-type", "text/event-stream"))
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main() -> None:
    upstream = os.environ["OPENAI_BASE_URL"].rstrip("/")
    handler = make_handler(Store(), os.environ["LITELLM_MASTER_KEY"], upstream, os.environ["OPENAI_API_KEY"])
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["GATEWAY_PORT"])), handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
