"""Inside the sandbox (the child): validate_app's runtime half: import smoke, start-up, create, actions.

Can every entity be created through the API with minimal valid data? The entities are the
``POST /<entity>/`` operations of the app's own OpenAPI document; their bodies come from the
request schemas (``samples``), and fields holding ids of other entities get the id of one
created earlier (from the domain model's associations when the host passed them as hints,
else by name: ``library``/``library_id``/``authors`` -> Library/Author). Creation runs in
passes until nothing new can be created, so dependency order needs no model. Then every
``/methods/`` action runs once on a created instance. Verdicts, not opinions: ``created``,
``failed``, ``unauthorized``, ``abstract``; ``effective``, ``failed``, ``rejected``,
``unverified``.
"""

from __future__ import annotations

import abc
import importlib
import re
import sys
from typing import Any

from kernel_ext.validation.apphost.exchange import Secrets, finish_rows, one_request
from kernel_ext.validation.apphost.lifespan import ErrorRecorder, Lifespan, describe_exception
from kernel_ext.validation.references import Responses
from kernel_ext.validation.samples import Schemas, minimal, sample_for_type

_ENTITY_PATH = re.compile(r"^/([A-Za-z][A-Za-z0-9_-]*)/?$")
_ACTION_PATH = re.compile(r"^/([A-Za-z][A-Za-z0-9_-]*)/(?:\{[^}]+\}/)?methods/([A-Za-z0-9_]+)/?$")
_PARAM_DOC = re.compile(r"^\s*-\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([A-Za-z_][A-Za-z0-9_\[\], ]*)", re.MULTILINE)
NOT_ENTITIES = frozenset({"login", "logout", "token", "register", "signup", "auth", "health", "bulk", "search", "upload"})


def norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def singular(name: str) -> str:
    """``authors`` -> ``author``, ``library_id`` -> ``library``, ``categories`` -> ``category``."""
    base = name
    for suffix in ("_ids", "_id", "Ids", "Id"):
        if base.endswith(suffix) and len(base) > len(suffix):
            base = base[: -len(suffix)]
            break
    n = norm(base)
    if n.endswith("ies"):
        return n[:-3] + "y"
    if n.endswith(("ses", "xes")):
        return n[:-2]
    return n[:-1] if n.endswith("s") and not n.endswith("ss") else n


class Probe:
    def __init__(self, app: Any, openapi: dict[str, Any], hints: dict[str, Any] | None, secrets: Secrets):
        self.app = app
        self.schemas = Schemas(openapi)
        self.paths = openapi.get("paths") or {}
        self.hints = {norm(k): v for k, v in ((hints or {}).get("entities") or {}).items()}
        self.hint_names = {norm(k): k for k in ((hints or {}).get("entities") or {})}
        self.secrets = secrets
        self.created: dict[str, Any] = {}  # norm(entity) -> id
        self.entities: dict[str, dict[str, Any]] = {}  # norm(entity) -> record

    # -- what the API offers ---------------------------------------------------------------------

    def discover(self) -> None:
        for path, operations in self.paths.items():
            match = _ENTITY_PATH.match(path)
            post = (operations or {}).get("post")
            if not match or not post or norm(match.group(1)) in NOT_ENTITIES:
                continue
            schema = (((post.get("requestBody") or {}).get("content") or {}).get("application/json") or {}).get("schema")
            if schema is None:
                continue
            schema_name = self.schemas.name_of(schema)
            key = norm(match.group(1))
            from_schema = schema_name[:-6] if schema_name.endswith("Create") else ""
            name = self.hint_names.get(key) or from_schema or match.group(1).title()
            self.entities[key] = {"entity": name, "path": path, "schema": schema,
                                  "schema_name": schema_name, "verdict": "pending", "status": None, "detail": "", "payload": None}

    def is_abstract(self, key: str, record: dict[str, Any]) -> bool:
        hint = self.hints.get(key)
        if hint is not None:
            return bool(hint.get("abstract"))
        cls = _find_class(record["schema_name"])
        return cls is not None and (abc.ABC in getattr(cls, "__bases__", ()) or bool(getattr(cls, "__abstractmethods__", None)))

    def target_of(self, key: str, field_name: str, field_schema: dict[str, Any]) -> str | None:
        """The entity (norm key) whose ids ``field_name`` holds, if it holds ids."""
        hint = self.hints.get(key) or {}
        refs = {norm(k): v for k, v in (hint.get("references") or {}).items()}
        if norm(field_name) in refs:
            return norm(refs[norm(field_name)])
        resolved = self.schemas.variant(self.schemas.resolve(field_schema))
        kind = resolved.get("type")
        if kind == "array":
            kind = self.schemas.variant(self.schemas.resolve(resolved.get("items") or {})).get("type")
        if kind not in ("integer", "string"):
            return None
        guess = singular(field_name)
        return guess if guess in self.entities and guess != key else None

    # -- creation -------------------------------------------------------------------------------

    def payload(self, key: str, record: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
        """The body for ``key``, or None and the entities it still waits for."""
        schema = self.schemas.resolve(record["schema"])
        props = schema.get("properties") or {}
        body: dict[str, Any] = {}
        waiting: list[str] = []
        bounds = {norm(k): v for k, v in ((self.hints.get(key) or {}).get("bounds") or {}).items()}
        for name in schema.get("required") or []:
            field_schema = props.get(name, {})
            target = self.target_of(key, name, field_schema)
            if target is None:
                body[name] = minimal(self.schemas, field_schema, bounds=bounds.get(norm(name)))
                continue
            if target not in self.created:
                waiting.append(target)
                continue
            resolved = self.schemas.variant(self.schemas.resolve(field_schema))
            body[name] = [self.created[target]] if resolved.get("type") == "array" else self.created[target]
        return (None, waiting) if waiting else (body, [])

    async def create_all(self, client: Any, recorder: ErrorRecorder, rows: list[dict[str, Any]]) -> None:
        pending = []
        for key, record in self.entities.items():
            if self.is_abstract(key, record):
                record["verdict"] = "abstract"
            else:
                pending.append(key)
        progress = True
        while pending and progress:
            progress = False
            for key in list(pending):
                record = self.entities[key]
                body, waiting = self.payload(key, record)
                if body is None:
                    needed = (self.entities[w]["entity"] if w in self.entities else w for w in waiting)
                    record["detail"] = "needs " + ", ".join(needed)
                    continue
                row = await self.send(client, recorder, "POST", record["path"], body, rows)
                record.update(status=row["status"], payload=body, detail="")
                if row["status"] is not None and 200 <= row["status"] < 300:
                    self.created[key] = _created_id(row["response"].get("body"), key)
                    record["verdict"] = "created"
                    pending.remove(key)
                    progress = True
                else:
                    record["verdict"] = "unauthorized" if row["status"] in (401, 403) else "failed"
                    record["detail"] = _detail(row)
        for key in pending:
            record = self.entities[key]
            if record["verdict"] == "pending":
                record["verdict"] = "failed"

    async def send(self, client: Any, recorder: ErrorRecorder, method: str, path: str, body: Any,
                   rows: list[dict[str, Any]]) -> dict[str, Any]:
        spec = {"method": method, "path": path, "json": body, "has_json": body is not None, "headers": {}}
        row = await one_request(client, recorder, spec, len(rows), Responses(), self.secrets)
        rows.append(row)
        return row

    # -- actions --------------------------------------------------------------------------------

    async def run_actions(self, client: Any, recorder: ErrorRecorder, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for path, operations in self.paths.items():
            match = _ACTION_PATH.match(path)
            post = (operations or {}).get("post")
            if not match or not post:
                continue
            key, method = norm(match.group(1)), match.group(2)
            entity = self.entities.get(key, {}).get("entity") or self.hint_names.get(key) or match.group(1).title()
            record = {"entity": entity, "action": method, "path": path, "verdict": "unverified", "status": None, "detail": ""}
            out.append(record)
            instance = self.instance_of(key)
            if "{" in path and instance is None:
                record["detail"] = f"no {entity} could be created to run it on"
                continue
            concrete = re.sub(r"\{[^}]+\}", str(instance), path)
            body = self.action_body(key, method, post)
            row = await self.send(client, recorder, "POST", concrete, body, rows)
            record["status"] = row["status"]
            if row["status"] is not None and 200 <= row["status"] < 300 and not row.get("error"):
                record["verdict"] = "effective"
            elif row["status"] is None or row["status"] >= 500:
                record["verdict"] = "failed"
                record["detail"] = _detail(row)
            else:
                record["verdict"] = "rejected"
                record["detail"] = _detail(row)
        return out

    def instance_of(self, key: str) -> Any:
        if key in self.created:
            return self.created[key]
        for sub in (self.hints.get(key) or {}).get("subclasses") or []:
            if norm(sub) in self.created:
                return self.created[norm(sub)]
        return None

    def action_body(self, key: str, method: str, operation: dict[str, Any]) -> Any:
        params = ((self.hints.get(key) or {}).get("methods") or {}).get(method)
        if params is None:
            params = {name: kind for name, kind in _PARAM_DOC.findall(operation.get("description") or "")}
        values = {name: sample_for_type(kind) for name, kind in params.items()}
        schema = (((operation.get("requestBody") or {}).get("content") or {}).get("application/json") or {}).get("schema")
        if schema is None:
            return None
        resolved = self.schemas.resolve(schema)
        props = resolved.get("properties") or {}
        if "params" in props:
            return {"params": values}
        body = minimal(self.schemas, schema)
        if isinstance(body, dict):
            body.update({k: v for k, v in values.items() if k in props or not props})
        return body


def _find_class(name: str) -> Any:
    if not name:
        return None
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None) or ""
        if file.startswith(sys.path[0]) and isinstance(getattr(module, name, None), type):
            return getattr(module, name)
    return None


def _created_id(body: Any, key: str) -> Any:
    if isinstance(body, dict):
        if "id" in body and not isinstance(body["id"], (dict, list)):
            return body["id"]
        for name, value in body.items():
            if norm(name) == key and isinstance(value, dict) and "id" in value:
                return value["id"]
        for value in body.values():
            if isinstance(value, dict) and "id" in value and not isinstance(value["id"], (dict, list)):
                return value["id"]
    return 1


def _detail(row: dict[str, Any]) -> str:
    body = (row.get("response") or {}).get("body")
    text = body if isinstance(body, str) else ""
    if isinstance(body, dict):
        text = str(body.get("detail") or body.get("message") or body)
    parts = [f"status {row['status']}" if row.get("status") is not None else "", row.get("error") or "", text[:300]]
    return "; ".join(p for p in parts if p)


async def run_probe(app: Any, job: dict[str, Any], app_dir: str, secrets: Secrets) -> dict[str, Any]:
    import httpx

    from kernel_ext.validation.apphost.exchange import BASE_URL

    result: dict[str, Any] = {"imports": [], "lifespan": {"ok": True, "error": None}, "openapi_error": None,
                              "entities": [], "actions": [], "requests": []}
    for module in job.get("modules") or []:
        try:
            importlib.import_module(module)
        except BaseException as exc:  # noqa: BLE001 - a module that cannot be imported is a finding
            result["imports"].append({"module": module, "error": describe_exception(exc, app_dir)})
    recorder = ErrorRecorder(app, app_dir)
    async with Lifespan(app) as lifespan:
        result["lifespan"] = {"ok": lifespan.error is None, "error": lifespan.error}
        if lifespan.error is not None or not job.get("runtime", True):
            return secrets.scrub(result)
        try:
            openapi = app.openapi() if hasattr(app, "openapi") else {}
        except Exception as exc:  # noqa: BLE001
            result["openapi_error"] = describe_exception(exc, app_dir)
            return secrets.scrub(result)
        probe = Probe(app, openapi, job.get("hints"), secrets)
        probe.discover()
        rows: list[dict[str, Any]] = []
        transport = httpx.ASGITransport(app=recorder, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, follow_redirects=True, trust_env=False) as client:
            await probe.create_all(client, recorder, rows)
            result["actions"] = await probe.run_actions(client, recorder, rows)
        result["entities"] = [{k: v for k, v in r.items() if k != "schema"} for r in probe.entities.values()]
    scrubbed = secrets.scrub(result)
    scrubbed["requests"] = finish_rows(rows, secrets)
    return scrubbed
