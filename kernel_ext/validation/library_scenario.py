"""The reference scenario for the Library example backend (BESSER's FastAPI generator).

Twenty requests: create a library, authors, a member and books that reference them, list,
get, count, update, run a method, search, paginate, delete, and check what is left. Tests,
the benchmark and notebooks share it; every request asserts its status. Expected values are
literals (a fresh database numbers from 1), so BESSER 8.4.1's own probe, which resolves
references in paths and bodies only, can run the very same scenario in the benchmark.
"""

from __future__ import annotations

from typing import Any


def library_requests() -> list[dict[str, Any]]:
    book = {"title": "Notes on the Analytical Engine", "isbn": "978-0-00-000001-1", "pages": 120, "genre": "SCIENCE",
            "library": "{{0.library.id}}", "authors": ["{{1.author.id}}"]}
    return [
        {"method": "POST", "path": "/library/", "json": {"name": "Central", "address": "1 Main St"}, "expected_status": 200},
        {"method": "POST", "path": "/author/", "json": {"name": "Ada Lovelace", "nationality": "British"},
         "expected_status": 200},
        {"method": "POST", "path": "/author/", "json": {"name": "Alan Turing", "nationality": "British"}, "expected_status": 200},
        {"method": "POST", "path": "/member/", "json": {"name": "Grace", "active": True, "member_since": "2024-01-15"},
         "expected_status": 200},
        {"method": "POST", "path": "/book/", "json": book, "expected_status": 200,
         "expected_fields": {"book.title": "Notes on the Analytical Engine", "author_ids": [1]}},
        {"method": "POST", "path": "/book/", "expected_status": 200,
         "json": {"title": "Computing Machinery", "isbn": "978-0-00-000002-8", "pages": 30, "genre": "SCIENCE",
                  "library": "{{0.library.id}}", "authors": ["{{1.author.id}}", "{{2.author.id}}"],
                  "borrower": "{{3.member.id}}"},
         "expected_fields": {"book.borrower_id": 1}},
        {"method": "GET", "path": "/book/", "expected_status": 200,
         "expected_fields": {"0.title": "Notes on the Analytical Engine"}},
        {"method": "GET", "path": "/book/{{4.book.id}}/", "expected_status": 200,
         "expected_fields": {"book.pages": 120, "author_ids.0": 1}},
        {"method": "GET", "path": "/author/{{2.author.id}}/", "expected_status": 200,
         "expected_fields": {"author.name": "Alan Turing"}},
        {"method": "GET", "path": "/book/count/", "expected_status": 200, "expected_fields": {"count": 2}},
        {"method": "PUT", "path": "/book/{{4.book.id}}/", "json": {**book, "pages": 150}, "expected_status": 200,
         "expected_fields": {"book.pages": 150}},
        {"method": "GET", "path": "/book/{{4.book.id}}/", "expected_status": 200, "expected_fields": {"book.pages": 150}},
        {"method": "POST", "path": "/book/{{4.book.id}}/methods/is_long/", "json": {"params": {"threshold": 100}},
         "expected_status": 200, "expected_fields": {"result": "True"}},
        {"method": "GET", "path": "/book/search/?title=Computing", "expected_status": 200, "expected_fields": {"0.pages": 30}},
        {"method": "GET", "path": "/library/{{0.library.id}}/", "expected_status": 200,
         "expected_fields": {"library.name": "Central"}},
        {"method": "GET", "path": "/book/paginated/?skip=0&limit=1", "expected_status": 200, "expected_fields": {"total": 2}},
        {"method": "DELETE", "path": "/book/{{5.book.id}}/", "expected_status": 200},
        {"method": "GET", "path": "/book/{{5.book.id}}/", "expected_status": 404},
        {"method": "GET", "path": "/book/count/", "expected_status": 200, "expected_fields": {"count": 1}},
        {"method": "GET", "path": "/statistics", "expected_status": 200, "expected_fields": {"book_count": 1, "author_count": 2}},
    ]
