"""Tasks on the blog (B-UML Python): a computed field over a relation, and a React frontend with complete CRUD."""

from __future__ import annotations

import json
import re
from typing import Any

from kernel_ext.eval.scripts import close, edit, plan, turns, write
from kernel_ext.eval.tasks.base import Task
from kernel_ext.eval.verify import Check, Outcome, Produced, http
from kernel_ext.providers.scripted import Turn, call

# -- a computed field over a relation -------------------------------------------------------------------

READ_POST = '        "post": db_post,\n        "comments_ids": [x[0] for x in comments_ids]}'
USER = {"method": "POST", "path": "/user/", "json": {"username": "ada", "email": "ada@example.org"}, "expected_status": 200}


def _post(title: str) -> dict[str, Any]:
    return {"method": "POST", "path": "/post/", "expected_status": 200,
            "json": {"title": title, "body": "one two three", "published": True, "author": "{{0.user.id}}"}}


def _comment(post: int) -> dict[str, Any]:
    return {"method": "POST", "path": "/comment/", "expected_status": 200,
            "json": {"text": "Nice", "post": f"{{{{{post}.post.id}}}}", "commenter": "{{0.user.id}}"}}


def _count_turns(expression: str) -> list:
    return turns(plan("GET /post/{id}/ returns comment_count"),
                 [edit("backend/routers/post.py", READ_POST, READ_POST[:-1] + f',\n        "comment_count": {expression}}}')],
                 close([("backend/routers/post.py", f'"comment_count": {expression}')]))


COUNT = Task(
    id="blog-comment-count",
    model="blog",
    request="GET /post/{id}/ should also return comment_count: how many comments that post has.",
    covers="a computed field (over a relation)",
    checks=(
        http("comment_count_per_post", "two comments on the first post and one on the second read 2 and 1",
             [USER, _post("First"), _post("Second"), _comment(1), _comment(1), _comment(2),
              {"method": "GET", "path": "/post/{{1.post.id}}/", "expected_status": 200, "expected_fields": {"comment_count": 2}},
              {"method": "GET", "path": "/post/{{2.post.id}}/", "expected_status": 200, "expected_fields": {"comment_count": 1}}]),
        http("comment_count_zero", "a post without comments reads 0",
             [USER, _post("Quiet"), {"method": "GET", "path": "/post/{{1.post.id}}/", "expected_status": 200,
                                     "expected_fields": {"comment_count": 0}}]),
    ),
    oracle=lambda: _count_turns("len(comments_ids)"),
    wrong=lambda: _count_turns("database.query(Comment).count()"),
    wrong_fails="comment_count_per_post",
    wrong_does="counts every comment in the database, not the post's",
)

# -- a React frontend with complete CRUD -------------------------------------------------------------------

ENTITIES = ("user", "post", "comment")
METHODS = ("GET", "POST", "PUT", "DELETE")
PACKAGE = json.dumps({"name": "blog-frontend", "private": True, "type": "module",
                      "scripts": {"dev": "vite", "build": "vite build"},
                      "dependencies": {"react": "^18.3.1", "react-dom": "^18.3.1"},
                      "devDependencies": {"vite": "^5.4.0", "@vitejs/plugin-react": "^4.3.0"}}, indent=2) + "\n"


def _api(with_delete: bool = True) -> str:
    lines = ['// One function per call the backend offers, for every entity of the model.',
             'const BASE = import.meta.env.VITE_API_URL ?? "http://localhost:8000";',
             '',
             'async function request(method, path, body) {',
             '  const response = await fetch(BASE + path, {method, headers: {"Content-Type": "application/json"},',
             '    body: body === undefined ? undefined : JSON.stringify(body)});',
             '  if (!response.ok) throw new Error(`${method} ${path}: ${response.status}`);',
             '  return response.json();',
             '}', '']
    for e in ENTITIES:
        name = e.capitalize()
        lines += [f'export const list{name}s = () => request("GET", "/{e}/");',
                  f'export const create{name} = (data) => request("POST", "/{e}/", data);',
                  f'export const update{name} = (id, data) => request("PUT", `/{e}/${{id}}/`, data);']
        if with_delete:
            lines.append(f'export const delete{name} = (id) => request("DELETE", `/{e}/${{id}}/`);')
        lines.append('')
    return "\n".join(lines)


APP = '''import {useEffect, useState} from "react";
import * as api from "./api.js";

function Table({name, list, create, update, remove, fields}) {
  const [rows, setRows] = useState([]);
  const [draft, setDraft] = useState({});
  const reload = () => list().then(setRows);
  useEffect(() => { reload(); }, []);
  return (
    <section>
      <h2>{name}</h2>
      <ul>{rows.map((row) => (
        <li key={row.id}>{fields.map((f) => String(row[f])).join(" / ")}
          <button onClick={() => update(row.id, {...row, ...draft}).then(reload)}>Save</button>
          {remove && <button onClick={() => remove(row.id).then(reload)}>Delete</button>}
        </li>))}
      </ul>
      {fields.map((f) => <input key={f} placeholder={f} onChange={(e) => setDraft({...draft, [f]: e.target.value})} />)}
      <button onClick={() => create(draft).then(reload)}>Add</button>
    </section>
  );
}

export default function App() {
  return (
    <main>
      <Table name="Users" list={api.listUsers} create={api.createUser} update={api.updateUser} remove={api.deleteUser}
             fields={["username", "email"]} />
      <Table name="Posts" list={api.listPosts} create={api.createPost} update={api.updatePost} remove={api.deletePost}
             fields={["title", "body", "published", "author"]} />
      <Table name="Comments" list={api.listComments} create={api.createComment} update={api.updateComment}
             remove={api.deleteComment} fields={["text", "post", "commenter"]} />
    </main>
  );
}
'''
MAIN = '''import {createRoot} from "react-dom/client";
import App from "./App.jsx";

createRoot(document.getElementById("root")).render(<App />);
'''
INDEX = '<!doctype html>\n<html><body><div id="root"></div><script type="module" src="/src/main.jsx"></script></body></html>\n'


def _package_json(produced: Produced) -> Outcome:
    text = produced.text("frontend/package.json")
    if text is None:
        return False, "frontend/package.json does not exist"
    try:
        deps = json.loads(text).get("dependencies", {})
    except (ValueError, AttributeError) as exc:
        return False, f"frontend/package.json is not a JSON object: {exc}"
    missing = [d for d in ("react", "react-dom") if d not in deps]
    return not missing, f"dependencies lack {missing}"


def _crud_calls(produced: Produced) -> Outcome:
    """Every entity has a GET, POST, PUT and DELETE request to its route somewhere in frontend/src."""
    src = produced.app_dir / "frontend" / "src"
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(src.rglob("*"))
             if p.suffix in (".js", ".jsx", ".ts", ".tsx") and p.is_file() and not p.is_symlink()] if src.is_dir() else []
    if not texts:
        return False, "frontend/src has no JavaScript or TypeScript files"
    lines = [line for text in texts for line in text.splitlines()]
    missing = [f"{m} /{e}/" for e in ENTITIES for m in METHODS
               if not any(re.search(rf'["\']{m}["\']', ln) and f"/{e}/" in ln for ln in lines)]
    return not missing, f"no request for {', '.join(missing)}"


def _frontend_turns(api: str) -> list:
    return [
        plan("Build a React frontend (Vite) with list, create, edit and delete for users, posts and comments"),
        Turn("", (write("frontend/package.json", PACKAGE), write("frontend/index.html", INDEX),
                  write("frontend/src/api.js", api), write("frontend/src/App.jsx", APP), write("frontend/src/main.jsx", MAIN))),
        # T1 is the host's own frontend task (checked by the host), T2 the planned one
        Turn("", (call("task_list", {"action": "done", "ids": ["T1", "T2"], "evidence": [
            {"id": "T2", "path": "frontend/src/api.js", "quote": 'export const listUsers = () => request("GET", "/user/");'}]}),)),
        Turn("The frontend is in place."),
    ]


FRONTEND = Task(
    id="blog-react-crud",
    model="blog",
    request="Add a React frontend with complete CRUD (list, create, edit, delete) for users, posts and comments.",
    covers="a React frontend with complete CRUD",
    checks=(Check("frontend_package_valid", "frontend/package.json is JSON and depends on react and react-dom", _package_json),
            Check("frontend_crud_complete", "every entity has list, create, update and delete requests to its route", _crud_calls)),
    oracle=lambda: _frontend_turns(_api()),
    wrong=lambda: _frontend_turns(_api(with_delete=False)),
    wrong_fails="frontend_crud_complete",
    wrong_does="writes the frontend without any delete",
)

TASKS = (COUNT, FRONTEND)
