"""Tasks on the Library example that change two entities in one transaction: borrowing a book sets
the book's borrower and records a loan, together or not at all."""

from __future__ import annotations

from typing import Any

from kernel_ext.eval.scripts import close, edit, plan, turns, wire, write
from kernel_ext.eval.tasks.base import Task
from kernel_ext.eval.verify import Check, Outcome, Produced
from kernel_ext.providers.scripted import Turn

RELATIONSHIPS = "#--- Relationships of the member table\n"
LOAN_CLASS = '''class Loan(Base):
    __tablename__ = "loan"
    id: Mapped_[int] = mapped_column(primary_key=True)
    book_id: Mapped_[int] = mapped_column(ForeignKey_("book.id"))
    member_id: Mapped_[int] = mapped_column(ForeignKey_("member.id"))
    borrowed_on: Mapped_[dt_date] = mapped_column(Date_)


'''
ATOMIC = '''    try:
        if book.borrower_id is not None:
            raise HTTPException(409, f"book {book_id} is already borrowed")
        loan = Loan(book_id=book.id, member_id=data.member, borrowed_on=date.today())
        database.add(loan)
        book.borrower_id = data.member
        database.commit()
    except Exception:
        database.rollback()
        raise
'''
# The plausible mistake: the loan is committed first, so a refused borrow still leaves a loan behind.
LOAN_FIRST = '''    loan = Loan(book_id=book.id, member_id=data.member, borrowed_on=date.today())
    database.add(loan)
    database.commit()
    if book.borrower_id is not None:
        raise HTTPException(409, f"book {book_id} is already borrowed")
    book.borrower_id = data.member
    database.commit()
'''
BORROW = '''"""Borrowing a book: the book's borrower and the loan record change together or not at all."""
from datetime import date

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel
from sqlalchemy.orm import Session

from database import get_db
from sql_alchemy import Book, Loan, Member

router = APIRouter(tags=["Book"])


class BorrowIn(BaseModel):
    member: int


@router.post("/book/{book_id}/borrow/")
def borrow_book(book_id: int, data: BorrowIn, database: Session = Depends(get_db)) -> dict:
    book = database.get(Book, book_id)
    if book is None:
        raise HTTPException(404, f"book {book_id} not found")
    if database.get(Member, data.member) is None:
        raise HTTPException(404, f"member {data.member} not found")
''' + ATOMIC + '''    return {"loan_id": loan.id, "book_id": book.id, "member_id": data.member}


@router.get("/loan/")
def list_loans(database: Session = Depends(get_db)) -> list:
    loans = database.query(Loan).order_by(Loan.id).all()
    return [{"id": x.id, "book_id": x.book_id, "member_id": x.member_id, "borrowed_on": x.borrowed_on.isoformat()}
            for x in loans]
'''

SETUP = [
    {"method": "POST", "path": "/library/", "json": {"name": "Central", "address": "1 Main St"}, "expected_status": 200},
    {"method": "POST", "path": "/author/", "json": {"name": "Ada", "nationality": "British"}, "expected_status": 200},
    {"method": "POST", "path": "/member/", "json": {"name": "Grace", "active": True, "member_since": "2024-01-15"},
     "expected_status": 200},
    {"method": "POST", "path": "/member/", "json": {"name": "Alan", "active": True, "member_since": "2024-02-01"},
     "expected_status": 200},
    {"method": "POST", "path": "/book/", "expected_status": 200,
     "json": {"title": "Notes", "isbn": "978-0-00-000001-1", "pages": 120, "genre": "SCIENCE",
              "library": "{{0.library.id}}", "authors": ["{{1.author.id}}"]}},
]
BOOK_READ = {"method": "GET", "path": "/book/{{4.book.id}}/", "expected_status": 200}
LOANS = {"method": "GET", "path": "/loan/", "expected_status": 200}


def _borrow(member: int, status: int | list[int]) -> dict[str, Any]:
    return {"method": "POST", "path": "/book/{{4.book.id}}/borrow/", "json": {"member": f"{{{{{member}.member.id}}}}"},
            "expected_status": status}


def _ids(report: Any) -> tuple[Any, Any]:
    """The ids the setup's first member and its book were given (bodies ``{"member": {...}}``, ``{"book": {...}}``)."""
    member, book = (r.response.body for r in report.requests[2:5:2])
    return (_id(member, "member"), _id(book, "book"))


def _id(body: Any, entity: str) -> Any:
    return (body.get(entity) or {}).get("id") if isinstance(body, dict) else None


def _state(report: Any) -> tuple[Any, list[Any]]:
    """The book's borrower and the loans listed, from the scenario's last two responses."""
    book, loans = (r.response.body for r in report.requests[-2:])
    borrower = (book.get("book") or {}).get("borrower_id") if isinstance(book, dict) else None
    listed = [(x.get("book_id"), x.get("member_id")) for x in loans if isinstance(x, dict)] if isinstance(loans, list) else loans
    return borrower, listed


def _borrowed_with_loan(produced: Produced) -> Outcome:
    report = produced.scenario([*SETUP, _borrow(2, [200, 201]), BOOK_READ, LOANS], "borrow")
    if not report.passed:
        return False, "; ".join(report.failures)
    (member, book), (borrower, loans) = _ids(report), _state(report)
    ok = borrower == member and loans == [(book, member)]
    return ok, f"after the borrow: the book's borrower {borrower!r} (expected {member!r}); loans {loans!r}"


def _refused_atomically(produced: Produced) -> Outcome:
    report = produced.scenario([*SETUP, _borrow(2, [200, 201]), _borrow(3, 409), BOOK_READ, LOANS], "borrow twice")
    if not report.passed:
        return False, "; ".join(report.failures)
    (member, book), (borrower, loans) = _ids(report), _state(report)
    ok = borrower == member and loans == [(book, member)]
    return ok, f"after the refused borrow: the book's borrower {borrower!r} (expected {member!r}); loans {loans!r} (expected one)"


def _borrow_turns(router: str) -> list[Turn]:
    return turns(
        plan("Add a Loan table and POST /book/{id}/borrow/ that sets the borrower and records the loan in one "
             "transaction (409 when already borrowed); GET /loan/ lists loans"),
        [edit("backend/sql_alchemy.py", RELATIONSHIPS, LOAN_CLASS + RELATIONSHIPS),
         write("backend/routers/borrow.py", router)],
        wire("routers.borrow", "book"),
        close([("backend/routers/borrow.py", "book.borrower_id = data.member")]),
        end="Books can be borrowed.",
    )


BORROW_TASK = Task(
    id="library-borrow",
    model="library",
    request=("Add POST /book/{id}/borrow/ taking a member id: in one transaction it sets the book's borrower to that "
             "member and records a Loan (book, member, date borrowed) in a new loan table; GET /loan/ lists the loans. "
             "Borrowing a book someone already has answers 409 and changes nothing."),
    covers="a custom endpoint changing two entities in one transaction (borrow a book)",
    checks=(
        Check("book_borrowed_with_loan", "a borrow sets the book's borrower and records exactly one loan for it",
              _borrowed_with_loan),
        Check("unavailable_refused_atomically", "borrowing a borrowed book answers 409, keeps its borrower, records no loan",
              _refused_atomically),
    ),
    oracle=lambda: _borrow_turns(BORROW),
    wrong=lambda: _borrow_turns(BORROW.replace(ATOMIC, LOAN_FIRST)),
    wrong_fails="unavailable_refused_atomically",
    wrong_does="commits the loan before checking the book is free: a refused borrow leaves a loan",
)

TASKS = (BORROW_TASK,)
