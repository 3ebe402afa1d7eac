"""Tasks on the clinic (PlantUML, inheritance and an enumeration): an OCL rule BESSER leaves to the
router, soft delete, and role-based access."""

from __future__ import annotations

from typing import Any

from kernel_ext.eval.scripts import close, edit, plan, turns, wire, write
from kernel_ext.eval.tasks.base import Task, forged_tokens
from kernel_ext.eval.verify import Check, Outcome, Produced, http
from kernel_ext.scenarios.library_jwt import DEPS

ROUTER = "backend/routers/appointment.py"
PEOPLE = [
    {"method": "POST", "path": "/patient/", "json": {"name": "Ada", "phone": "555-1", "birth_date": "1990-02-03"}, "expected_status": 200},
    {"method": "POST", "path": "/doctor/", "json": {"name": "Dr Who", "phone": "555-2", "specialty": "GENERAL"}, "expected_status": 200},
    {"method": "POST", "path": "/doctor/", "json": {"name": "Dr No", "phone": "555-3", "specialty": "CARDIOLOGY"}, "expected_status": 200},
]


def book(doctor: int, hour: int, status: int | list[int]) -> dict[str, Any]:
    return {"method": "POST", "path": "/appointment/", "expected_status": status,
            "json": {"day": "2024-06-03", "hour": hour, "duration_minutes": 30, "reason": "check-up",
                     "Doctor": f"{{{{{doctor}.doctor.id}}}}", "Patient": "{{0.patient.id}}"}}


# -- a validation rule from an OCL constraint (no_double_booking) ------------------------------------------

CREATE_ANCHOR = "\n    db_appointment = Appointment(\n"
CLASH = '''
    # OCL no_double_booking: a doctor has one appointment per day and hour
    clash = database.query(Appointment).filter(
        Appointment.Doctor_id == appointment_data.Doctor,
        Appointment.day == appointment_data.day,
        Appointment.hour == appointment_data.hour,
    ).first()
    if clash is not None:
        raise HTTPException(status_code=409, detail="the doctor already has an appointment at that day and hour")
'''


def _ocl_turns(clash: str) -> list:
    return turns(plan("Enforce OCL no_double_booking when creating an appointment (409 on a clash)"),
                 [edit(ROUTER, CREATE_ANCHOR, clash + CREATE_ANCHOR)],
                 close([(ROUTER, "Appointment.Doctor_id == appointment_data.Doctor,")]))


OCL = Task(
    id="clinic-ocl-double-booking",
    model="clinic",
    request=("Enforce the model's OCL constraint no_double_booking: creating an appointment for a doctor at a day and "
             "hour that doctor already has must answer 409."),
    covers="a validation rule taken from an OCL constraint",
    checks=(
        http("double_booking_refused", "a second appointment for the same doctor, day and hour answers 409",
             [*PEOPLE, book(1, 9, 200), book(1, 9, 409),
              {"method": "GET", "path": "/appointment/count/", "expected_status": 200, "expected_fields": {"count": 1}}]),
        http("other_slots_allowed", "another hour, or another doctor at the same hour, is booked",
             [*PEOPLE, book(1, 9, 200), book(1, 10, 200), book(2, 9, 200)]),
    ),
    oracle=lambda: _ocl_turns(CLASH),
    wrong=lambda: _ocl_turns(CLASH.replace("        Appointment.hour == appointment_data.hour,\n", "")),
    wrong_fails="other_slots_allowed",
    wrong_does="forgets the hour: one appointment per doctor per day",
)

# -- soft delete ----------------------------------------------------------------------------------------------

COLUMN = '    Patient_id: Mapped_[int] = mapped_column(ForeignKey_("patient.id"))\n'
HARD_DELETE = "    database.delete(db_appointment)\n    database.commit()\n    return deleted_appointment"
SOFT_DELETE = "    db_appointment.deleted = True\n    database.commit()\n    return deleted_appointment"
GET_ONE = '        raise HTTPException(status_code=404, detail="Appointment not found")\n\n    response_data = {'
FLAG = "    deleted: Mapped_[bool] = mapped_column(Boolean_, default=False)\n"
NOT_FOUND = '        raise HTTPException(status_code=404, detail="Appointment not found")'
LIST_ALL = "        return database.query(Appointment).all()\n"
TRASH = '''"""Soft-deleted appointments: kept, hidden from the other routes, listed here."""
from fastapi import APIRouter, Depends
from sqlalchemy.orm import Session

from database import get_db
from sql_alchemy import Appointment

router = APIRouter(tags=["Appointment"])


@router.get("/deleted-appointments/", response_model=None)
def deleted_appointments(database: Session = Depends(get_db)) -> list:
    return database.query(Appointment).filter(Appointment.deleted.is_(True)).all()
'''


def _listed(produced: Produced, path: str, name: str) -> tuple[bool, Any]:
    report = produced.scenario([PEOPLE[0], PEOPLE[1], book(1, 9, 200),
                                {"method": "DELETE", "path": "/appointment/{{2.id}}/", "expected_status": 200},
                                {"method": "GET", "path": "/appointment/{{2.id}}/", "expected_status": 404},
                                {"method": "GET", "path": path, "expected_status": 200}], name)
    return report.passed, report.requests[-1].response.body if report.passed else "; ".join(report.failures)


def _deleted_hidden(produced: Produced) -> Outcome:
    ok, body = _listed(produced, "/appointment/", "soft delete hides")
    return ok and body == [], f"after the delete, GET /appointment/ gave {body!r}"


def _deleted_kept(produced: Produced) -> Outcome:
    ok, body = _listed(produced, "/deleted-appointments/", "soft delete keeps")
    kept = ok and isinstance(body, list) and [a.get("reason") for a in body if isinstance(a, dict)] == ["check-up"]
    return kept, f"GET /deleted-appointments/ gave {body!r}"


def _soft_turns(delete: str) -> list:
    return turns(plan("Soft delete appointments: a deleted flag, hidden from reads, listed at /deleted-appointments/"),
                 [edit("backend/sql_alchemy.py", COLUMN, COLUMN + FLAG),
                  edit(ROUTER, HARD_DELETE, delete),
                  edit(ROUTER, GET_ONE, GET_ONE.replace("\n\n", "\n    if db_appointment.deleted:\n" + NOT_FOUND + "\n\n", 1)),
                  edit(ROUTER, LIST_ALL, "        return database.query(Appointment).filter(Appointment.deleted.is_not(True)).all()\n"),
                  write("backend/routers/deleted_appointments.py", TRASH)],
                 wire("routers.deleted_appointments", "appointment"),
                 close([("backend/sql_alchemy.py", "deleted: Mapped_[bool] = mapped_column(Boolean_, default=False)")]))


SOFT = Task(
    id="clinic-soft-delete",
    model="clinic",
    request=("Make deleting an appointment a soft delete: DELETE /appointment/{id}/ marks it deleted, the other "
             "appointment routes no longer show it (404 on read), and GET /deleted-appointments/ lists the deleted ones."),
    covers="soft delete",
    checks=(Check("deleted_hidden", "a deleted appointment is gone from the list and its read answers 404", _deleted_hidden),
            Check("deleted_row_kept", "the deleted appointment is still stored and listed at /deleted-appointments/", _deleted_kept)),
    oracle=lambda: _soft_turns(SOFT_DELETE),
    wrong=lambda: _soft_turns(HARD_DELETE),
    wrong_fails="deleted_row_kept",
    wrong_does="adds the flag and the trash route but still deletes the row",
)

# -- role-based access ---------------------------------------------------------------------------------------

ROLES = '''"""Accounts with a role (admin or staff), and a report only admins may read."""
import hashlib
import hmac
import os
from typing import Literal

from fastapi import APIRouter, Depends, Header, HTTPException, status
from pydantic import BaseModel
from sqlalchemy import func
from sqlalchemy.orm import Session

from database import get_db
from deps import SECRET_KEY, decode_token, encode_token
from sql_alchemy import Appointment

router = APIRouter(tags=["Auth"])
_USERS: dict[str, tuple[bytes, bytes, str]] = {}


class Account(BaseModel):
    username: str
    password: str
    role: Literal["admin", "staff"] = "staff"


class Credentials(BaseModel):
    username: str
    password: str


def _hash(password: str, salt: bytes) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 100_000)


@router.post("/auth/register", status_code=status.HTTP_201_CREATED)
def register(account: Account) -> dict:
    if account.username in _USERS:
        raise HTTPException(status.HTTP_409_CONFLICT, "username taken")
    salt = os.urandom(16)
    _USERS[account.username] = (salt, _hash(account.password, salt), account.role)
    return {"username": account.username, "role": account.role}


@router.post("/auth/login")
def login(credentials: Credentials) -> dict:
    stored = _USERS.get(credentials.username)
    if stored is None or not hmac.compare_digest(stored[1], _hash(credentials.password, stored[0])):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong username or password")
    token = encode_token({"sub": credentials.username, "role": stored[2]}, SECRET_KEY)
    return {"access_token": token, "token_type": "bearer"}


def current_claims(authorization: str = Header(default="")) -> dict:
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing bearer token")
    return decode_token(token, SECRET_KEY)


def require_admin(claims: dict = Depends(current_claims)) -> dict:
    if claims.get("role") != "admin":
        raise HTTPException(status.HTTP_403_FORBIDDEN, "admins only")
    return claims


@router.get("/reports/appointments-per-doctor/")
def appointments_per_doctor(claims: dict = Depends(require_admin), database: Session = Depends(get_db)) -> dict:
    rows = database.query(Appointment.Doctor_id, func.count(Appointment.id)).group_by(Appointment.Doctor_id).all()
    return {str(doctor): count for doctor, count in rows}
'''


def _account(name: str, role: str) -> list[dict[str, Any]]:
    body = {"username": name, "password": "pw-" + name}
    return [{"method": "POST", "path": "/auth/register", "json": {**body, "role": role}, "expected_status": [200, 201]},
            {"method": "POST", "path": "/auth/login", "json": body, "expected_status": 200}]


def _report(status: int, token: str | None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {{{{{token}.access_token}}}}"} if token else None
    return {"method": "GET", "path": "/reports/appointments-per-doctor/", "expected_status": status,
            **({"headers": headers} if headers else {})}


def _report_counts(produced: Produced) -> Outcome:
    """An admin reads the report after two appointments with the first doctor and one with the second."""
    report = produced.scenario([*PEOPLE, book(1, 9, 200), book(1, 10, 200), book(2, 9, 200), *_account("root", "admin"),
                                _report(200, "7")], "report counts")  # 7: the admin's login
    if not report.passed:
        return False, "; ".join(report.failures)
    doctors = [r.response.body for r in report.requests[1:3]]
    ids = [(d.get("doctor") or {}).get("id") if isinstance(d, dict) else None for d in doctors]  # {"doctor": {...}}
    expected = {str(ids[0]): 2, str(ids[1]): 1}
    body = report.requests[-1].response.body
    return body == expected, f"the report read {body!r}, expected {expected!r}"


def _roles_turns(code: str) -> list:
    return turns(plan("JWT accounts with roles; GET /reports/appointments-per-doctor/ for admins only"),
                 [write("backend/deps.py", DEPS), write("backend/roles.py", code)],
                 wire("roles", "appointment"),
                 close([("backend/roles.py", 'token = encode_token({"sub": credentials.username, "role": stored[2]}, SECRET_KEY)')]))


RBAC = Task(
    id="clinic-role-access",
    model="clinic",
    request=("Add JWT accounts with a role (admin or staff): POST /auth/register (username, password, role) and "
             "POST /auth/login returning an access_token. GET /reports/appointments-per-doctor/ is for admins only: "
             "401 without a token, 403 for staff."),
    covers="role-based access",
    checks=(
        Check("admin_reads_report", "an admin's token reads the report, and it counts each doctor's appointments",
              _report_counts),
        http("staff_forbidden", "a staff token is refused with 403", [*_account("sam", "staff"), _report(403, "1")]),
        http("anonymous_refused", "no token is refused with 401", [_report(401, None)]),
        http("forged_admin_refused", "a token claiming role admin that the app did not sign is refused (401 or 403)",
             [*_account("sam", "staff"),
              *({**_report(401, None), "expected_status": [401, 403], "headers": {"Authorization": f"Bearer {token}"}}
                for token in forged_tokens({"sub": "sam", "role": "admin"}))]),
    ),
    oracle=lambda: _roles_turns(ROLES),
    wrong=lambda: _roles_turns(ROLES.replace("claims: dict = Depends(require_admin), database",
                                             "claims: dict = Depends(current_claims), database")),
    wrong_fails="staff_forbidden",
    wrong_does="checks the token but not the role",
)

TASKS = (OCL, SOFT, RBAC)
