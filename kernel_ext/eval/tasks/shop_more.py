"""Tasks on the shop's list, read and update routes: pagination and filtering, seed data, a computed
field, and a rule on updates (an order's status only moves forward)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernel_ext.eval.scripts import close, edit, plan, turns, write
from kernel_ext.eval.tasks.base import Task
from kernel_ext.eval.verify import Check, Outcome, Produced, http

PRODUCTS = [("Pen", 2.0, 100), ("Lamp", 20.0, 5), ("Desk", 120.0, 3), ("Chair", 45.0, 0), ("Mug", 8.0, 12)]
CREATE_ALL = [{"method": "POST", "path": "/product/", "json": {"name": n, "price": p, "stock": s}, "expected_status": 200}
              for n, p, s in PRODUCTS]


def names_listed(name: str, why: str, query: str, expected: Sequence[str]) -> Check:
    """The five products created, then ``GET /product/?<query>`` answers exactly ``expected``, in order."""

    def run(produced: Produced) -> Outcome:
        report = produced.scenario([*CREATE_ALL, {"method": "GET", "path": f"/product/?{query}", "expected_status": 200}], name)
        if not report.passed:
            return False, "; ".join(report.failures)
        body: Any = report.requests[-1].response.body
        got = [item.get("name") for item in body] if isinstance(body, list) and all(isinstance(i, dict) for i in body) else body
        return got == list(expected), f"GET /product/?{query} listed {got!r}, expected {list(expected)!r}"

    return Check(name, why, run)


# -- pagination and filtering on the list route ------------------------------------------------------------

LIST_SIGNATURE = "def get_all_product(detailed: bool = False, database: Session = Depends(get_db)) -> list:"
PAGED_SIGNATURE = ("def get_all_product(detailed: bool = False, skip: int = 0, limit: int = 100, min_price: float | None = None,\n"
                   "                    max_price: float | None = None, database: Session = Depends(get_db)) -> list:")
FLAT_LIST = "        return database.query(Product).all()\n"
PAGED_LIST = '''        query = database.query(Product)
        if min_price is not None:
            query = query.filter(Product.price >= min_price)
        if max_price is not None:
            query = query.filter(Product.price <= max_price)
        return query.order_by(Product.id).offset(skip).limit(limit).all()
'''


def _paging_turns(body: str) -> list:
    return turns(plan("GET /product/: skip/limit pagination and min_price/max_price filters"),
                 [edit("backend/routers/product.py", LIST_SIGNATURE, PAGED_SIGNATURE),
                  edit("backend/routers/product.py", FLAT_LIST, body)],
                 close([("backend/routers/product.py", "query = query.filter(Product.price >= min_price)")]))


PAGING = Task(
    id="shop-list-paging",
    model="shop",
    request=("Let GET /product/ page and filter: skip and limit query parameters (in id order), and min_price / "
             "max_price filters (inclusive) that combine with them."),
    covers="pagination and filtering on a list route",
    checks=(
        names_listed("list_paginated", "skip=1&limit=2 lists the 2nd and 3rd products", "skip=1&limit=2", ["Lamp", "Desk"]),
        names_listed("list_filtered_by_price", "min_price=8&max_price=45 lists the products priced 8 to 45",
                     "min_price=8&max_price=45", ["Lamp", "Chair", "Mug"]),
        names_listed("filters_and_paging_combine", "min_price=8&skip=1&limit=2 pages the filtered list",
                     "min_price=8&skip=1&limit=2", ["Desk", "Chair"]),
    ),
    oracle=lambda: _paging_turns(PAGED_LIST),
    wrong=lambda: _paging_turns(PAGED_LIST.replace(".offset(skip)", "")),
    wrong_fails="list_paginated",
    wrong_does="applies limit but forgets skip",
)

# -- seed data ------------------------------------------------------------------------------------------------

SEED = '''"""Seed data: a few products and a customer, added once, when the database is empty."""
from database import SessionLocal
from sql_alchemy import Customer, Product

PRODUCTS = [("Lamp", 20.0, 5), ("Desk", 120.0, 3), ("Chair", 45.0, 8)]


def seed_database() -> None:
    with SessionLocal() as session:
        if session.query(Product).count() or session.query(Customer).count():
            return
        session.add_all([Product(name=name, price=price, stock=stock) for name, price, stock in PRODUCTS])
        session.add(Customer(name="Demo Customer", email="demo@example.org"))
        session.commit()
'''
SEED_HOOK = "app.include_router(customer_router.router)\n"


SEEDING = Task(
    id="shop-seed",
    model="shop",
    request=("Seed the database when it is empty at start-up: three products (Lamp, Desk, Chair, with prices and "
             "stock) and one demo customer."),
    covers="seed data",
    checks=(
        http("seed_present_at_startup", "a fresh app lists the three products and one customer before any write",
             [{"method": "GET", "path": "/product/count/", "expected_status": 200, "expected_fields": {"count": 3}},
              {"method": "GET", "path": "/customer/count/", "expected_status": 200, "expected_fields": {"count": 1}},
              {"method": "GET", "path": "/product/", "expected_status": 200,
               "expected_fields": {"0.name": "Lamp", "1.name": "Desk", "2.name": "Chair"}}]),
        http("seed_usable", "the seeded rows are real rows: a seeded product can be read and updated",
             [{"method": "GET", "path": "/product/1/", "expected_status": 200, "expected_fields": {"product.name": "Lamp"}},
              {"method": "PUT", "path": "/product/1/", "json": {"name": "Lamp", "price": 22.0, "stock": 4}, "expected_status": 200},
              {"method": "GET", "path": "/product/1/", "expected_status": 200, "expected_fields": {"product.stock": 4}}]),
    ),
    oracle=lambda: turns(plan("Seed three products and a demo customer when the database is empty"),
                         [write("backend/seed.py", SEED),
                          edit("backend/main_api.py", SEED_HOOK, SEED_HOOK + "\nfrom seed import seed_database\n\nseed_database()\n")],
                         close([("backend/seed.py", "session.add(Customer(name=\"Demo Customer\", email=\"demo@example.org\"))")])),
    # the plausible mistake: a seed script a person must remember to run, never called by the app
    wrong=lambda: turns(plan("Seed three products and a demo customer when the database is empty"),
                        [write("backend/seed.py", SEED + "\n\nif __name__ == \"__main__\":\n    seed_database()\n")],
                        close([("backend/seed.py", "session.add(Customer(name=\"Demo Customer\", email=\"demo@example.org\"))")])),
    wrong_fails="seed_present_at_startup",
    wrong_does="writes a seed script the app never runs",
)

# -- a computed field ------------------------------------------------------------------------------------------

READ_BODY = '        "product": db_product,\n        "order_lines_ids": [x[0] for x in order_lines_ids]}'


def _computed_turns(expression: str) -> list:
    return turns(plan("GET /product/{id}/ returns stock_value = price x stock"),
                 [edit("backend/routers/product.py", READ_BODY,
                       READ_BODY[:-1] + f',\n        "stock_value": {expression}}}')],
                 close([("backend/routers/product.py", f'"stock_value": {expression}')]))


def _stock_value(price: float, stock: int, expected: float) -> list[dict[str, Any]]:
    return [{"method": "POST", "path": "/product/", "json": {"name": "Lamp", "price": price, "stock": stock}, "expected_status": 200},
            {"method": "GET", "path": "/product/{{0.product.id}}/", "expected_status": 200,
             "expected_fields": {"stock_value": expected, "product.stock": stock}}]


COMPUTED = Task(
    id="shop-computed-field",
    model="shop",
    request="GET /product/{id}/ should also return stock_value: the product's price times its stock.",
    covers="a computed field",
    checks=(
        http("stock_value_computed", "20.5 x 4 reads 82.0; 3 x 0 reads 0",
             [*_stock_value(20.5, 4, 82.0), *[{**r, "path": r["path"].replace("{{0.", "{{2.")} for r in _stock_value(3.0, 0, 0.0)]]),
        http("stock_value_follows_updates", "after the stock is updated to 2, stock_value reads 41.0",
             [*_stock_value(20.5, 4, 82.0),
              {"method": "PUT", "path": "/product/{{0.product.id}}/", "json": {"name": "Lamp", "price": 20.5, "stock": 2},
               "expected_status": 200},
              {"method": "GET", "path": "/product/{{0.product.id}}/", "expected_status": 200, "expected_fields": {"stock_value": 41.0}}]),
    ),
    oracle=lambda: _computed_turns("db_product.price * db_product.stock"),
    wrong=lambda: _computed_turns("db_product.price + db_product.stock"),
    wrong_fails="stock_value_computed",
    wrong_does="adds price and stock instead of multiplying",
)

# -- a rule on updates: an order's status only moves forward ------------------------------------------------

UPDATE_ANCHOR = "    setattr(db_order, 'placed_on', order_data.placed_on)\n"
FORWARD_ONLY = """    # orders move only forward, one step at a time: PENDING -> PAID -> SHIPPED
    flow = ["PENDING", "PAID", "SHIPPED"]
    current, wanted = getattr(db_order.status, "name", db_order.status), order_data.status.name
    if flow.index(wanted) not in (flow.index(current), flow.index(current) + 1):
        raise HTTPException(status_code=409, detail=f"an order cannot go from {current} to {wanted}")
"""
# The plausible mistake: going back is refused, skipping a step (shipping an unpaid order) is not.
NOT_BACKWARD = FORWARD_ONLY.replace("not in (flow.index(current), flow.index(current) + 1)", "< flow.index(current)")
ORDER_SETUP = [{"method": "POST", "path": "/customer/", "json": {"name": "Ada", "email": "ada@example.org"}, "expected_status": 200},
               {"method": "POST", "path": "/order/", "expected_status": 200,
                "json": {"placed_on": "2024-05-01", "status": "PENDING", "customer": "{{0.customer.id}}"}}]


def _move(status: str, expected: int) -> dict[str, Any]:
    return {"method": "PUT", "path": "/order/{{1.order.id}}/", "expected_status": expected,
            "json": {"placed_on": "2024-05-01", "status": status, "customer": "{{0.customer.id}}"}}


def _status_is(status: str) -> dict[str, Any]:
    return {"method": "GET", "path": "/order/{{1.order.id}}/", "expected_status": 200, "expected_fields": {"order.status": status}}


def _status_turns(rule: str) -> list:
    return turns(plan("PUT /order/{id}/: the status moves only forward one step (PENDING, PAID, SHIPPED), else 409"),
                 [edit("backend/routers/order.py", UPDATE_ANCHOR, rule + UPDATE_ANCHOR)],
                 close([("backend/routers/order.py", 'flow = ["PENDING", "PAID", "SHIPPED"]')]))


STATUS = Task(
    id="shop-order-status",
    model="shop",
    request=("An order's status only moves forward, one step at a time: PENDING, then PAID, then SHIPPED. PUT "
             "/order/{id}/ with any other status change answers 409 and changes nothing (keeping the same status is fine)."),
    covers="a business rule on updates (a status that only moves forward)",
    checks=(
        http("forward_steps_allowed", "PENDING -> PAID -> SHIPPED is accepted step by step, and the same status again",
             [*ORDER_SETUP, _move("PAID", 200), _move("PAID", 200), _move("SHIPPED", 200), _status_is("SHIPPED")]),
        http("skipping_refused", "PENDING -> SHIPPED answers 409 and the order stays PENDING",
             [*ORDER_SETUP, _move("SHIPPED", 409), _status_is("PENDING")]),
        http("going_back_refused", "PAID -> PENDING answers 409 and the order stays PAID",
             [*ORDER_SETUP, _move("PAID", 200), _move("PENDING", 409), _status_is("PAID")]),
    ),
    oracle=lambda: _status_turns(FORWARD_ONLY),
    wrong=lambda: _status_turns(NOT_BACKWARD),
    wrong_fails="skipping_refused",
    wrong_does="refuses going back but lets an unpaid order ship",
)

TASKS = (PAGING, SEEDING, COMPUTED, STATUS)
