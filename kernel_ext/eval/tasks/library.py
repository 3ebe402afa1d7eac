"""Tasks on the Library example: JWT with a protected route, a request the scaffold already satisfies."""

from __future__ import annotations

from kernel_ext.eval.scripts import close, edit, plan, turns, wire, write
from kernel_ext.eval.tasks.base import Task, forged_tokens
from kernel_ext.eval.verify import Check, Outcome, Produced, http, status_is
from kernel_ext.providers.scripted import Turn
from kernel_ext.scenarios.library_jwt import AUTH, DEPS

# -- JWT authentication with a protected route ----------------------------------------------------

AUTH_OK = AUTH.replace("from deps import encode_token, get_current_user", "from deps import SECRET_KEY, encode_token, get_current_user")
# The plausible mistake: /auth/me answers whoever logged in last, with no token checked.
AUTH_OPEN = AUTH_OK.replace("_USERS: dict[str, tuple[bytes, bytes]] = {}",
                            "_USERS: dict[str, tuple[bytes, bytes]] = {}\n_LAST: dict[str, str] = {}").replace(
    "    token = encode_token(", "    _LAST['user'] = credentials.username\n    token = encode_token(").replace(
    "def me(user: str = Depends(get_current_user)) -> dict:\n    return {\"username\": user}",
    "def me() -> dict:\n    return {\"username\": _LAST.get('user', '')}")
CREDENTIALS = {"username": "ada", "password": "correct horse"}
REGISTER = {"method": "POST", "path": "/auth/register", "json": CREDENTIALS, "expected_status": [200, 201]}
LOGIN = {"method": "POST", "path": "/auth/login", "json": CREDENTIALS, "expected_status": 200}


def _jwt_turns(auth: str) -> list[Turn]:
    return turns(
        plan("Add JWT authentication: register, log in, and a protected GET /auth/me"),
        [write("backend/deps.py", DEPS), write("backend/auth.py", auth)],
        wire("auth", "author"),
        close([("backend/auth.py", 'token = encode_token({"sub": credentials.username}, SECRET_KEY)')]),
        end="JWT authentication is in place.",
    )


JWT = Task(
    id="library-jwt",
    model="library",
    request=("Add JWT authentication: POST /auth/register and POST /auth/login (username and password; login returns "
             "an access_token), and a protected GET /auth/me that returns the current username. /auth/me must "
             "answer 401 without a valid bearer token."),
    covers="JWT authentication with a protected route",
    checks=(
        http("token_opens_protected_route", "a registered user logs in and reads /auth/me with the bearer token",
             [REGISTER, LOGIN, {"method": "GET", "path": "/auth/me", "headers": {"Authorization": "Bearer {{1.access_token}}"},
                                "expected_status": 200, "expected_fields": {"username": "ada"}}]),
        http("protected_route_refuses_without_token",
             "/auth/me answers 401 with no token, an empty one, and ones forged for a real user (unsigned or wrongly signed)",
             [REGISTER, LOGIN, {"method": "GET", "path": "/auth/me", "expected_status": 401},
              *({"method": "GET", "path": "/auth/me", "headers": {"Authorization": f"Bearer {token}"}, "expected_status": 401}
                for token in ("e30.e30.c2ln", *forged_tokens({"sub": CREDENTIALS["username"]})))]),
    ),
    oracle=lambda: _jwt_turns(AUTH_OK),
    wrong=lambda: _jwt_turns(AUTH_OPEN),
    wrong_fails="protected_route_refuses_without_token",
    wrong_does="adds register/login but /auth/me checks no token",
)

# -- a request the scaffold already satisfies -----------------------------------------------------


def _scaffold_untouched(produced: Produced) -> Outcome:
    """From run.json (the host's): the final manifest is exactly the generator's ledger."""
    recipe = produced.recipe
    generated, files = recipe.get("generated") or {}, recipe.get("files") or {}
    changed = sorted(p for p, h in generated.items() if files.get(p) != h)
    added = sorted(set(files) - set(generated))
    return not (changed or added), f"changed: {changed or 'none'}; added: {added or 'none'}"


BOOK = {"title": "Notes", "isbn": "978-0-00-000001-1", "genre": "SCIENCE", "library": "{{0.library.id}}",
        "authors": ["{{1.author.id}}"]}
SETUP = [{"method": "POST", "path": "/library/", "json": {"name": "Central", "address": "1 Main St"}, "expected_status": 200},
         {"method": "POST", "path": "/author/", "json": {"name": "Ada", "nationality": "British"}, "expected_status": 200}]
SATISFIED_VALIDATOR = '''
    @field_validator('pages')
    @classmethod
    def pages_at_least_one(cls, v):
        if v < 1:
            raise ValueError('a book has at least one page')
        return v
'''

SATISFIED = Task(
    id="library-already-satisfied",
    model="library",
    request="Make sure a book cannot be created with zero or negative pages (the pages_positive rule of the model).",
    covers="a request the scaffold already satisfies (Phase 2 skipped)",
    checks=(
        http("nonpositive_pages_refused", "a book with 0 or -3 pages is refused, one with 12 is created",
             [*SETUP, {"method": "POST", "path": "/book/", "json": {**BOOK, "pages": 0}, "expected_status": [400, 422]},
              {"method": "POST", "path": "/book/", "json": {**BOOK, "pages": -3}, "expected_status": [400, 422]},
              {"method": "POST", "path": "/book/", "json": {**BOOK, "pages": 12}, "expected_status": 200}]),
        Check("scaffold_untouched", "nothing was written: the final tree is the generator's (run.json's ledger and manifest)",
              _scaffold_untouched),
        status_is("completed", "the run ended completed: an empty plan, Phase 2 skipped, nothing left open"),
    ),
    oracle=lambda: [plan()],
    wrong=lambda: turns(
        plan("Validate that pages is positive when creating a book"),
        [edit("backend/pydantic_classes.py", "class AuthorCreate(PersonCreate):",
              SATISFIED_VALIDATOR + "\nclass AuthorCreate(PersonCreate):")],
        close([("backend/pydantic_classes.py", "raise ValueError('a book has at least one page')")]),
    ),
    wrong_fails="scaffold_untouched",
    wrong_does="re-implements the existing pages rule in the generated schema file",
)

TASKS = (JWT, SATISFIED)
