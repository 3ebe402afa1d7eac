"""Tasks on the shop (JSON model): placing an order that reduces stock in one transaction."""

from __future__ import annotations

from kernel_ext.eval.scripts import close, plan, turns, wire, write
from kernel_ext.eval.tasks.base import Task
from kernel_ext.eval.verify import http

PLACE_ORDER = '''"""Placing an order: the order, its lines and the stock change commit together or not at all."""
from datetime import date

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from database import get_db
from sql_alchemy import Customer, Order, OrderLine, Product

router = APIRouter(tags=["Order"])


class LineIn(BaseModel):
    product: int
    quantity: int = Field(gt=0)


class PlaceOrder(BaseModel):
    customer: int
    lines: list[LineIn] = Field(min_length=1)


@router.post("/order/place/")
def place_order(data: PlaceOrder, database: Session = Depends(get_db)) -> dict:
    if database.get(Customer, data.customer) is None:
        raise HTTPException(404, f"customer {data.customer} not found")
    try:
        order = Order(placed_on=date.today(), status="PENDING", customer_id=data.customer)
        database.add(order)
        database.flush()
        for line in data.lines:
            product = database.get(Product, line.product)
            if product is None:
                raise HTTPException(404, f"product {line.product} not found")
            if product.stock < line.quantity:
                raise HTTPException(409, f"not enough stock for product {product.id}: {product.stock} left")
            product.stock -= line.quantity
            database.add(OrderLine(quantity=line.quantity, order_id=order.id, product_id=product.id))
        database.commit()
    except Exception:
        database.rollback()
        raise
    return {"order_id": order.id, "lines": len(data.lines)}
'''
# The plausible mistake: the order and its lines are written, the stock is never touched.
PLACE_ORDER_NO_STOCK = PLACE_ORDER.replace(
    '''            if product.stock < line.quantity:
                raise HTTPException(409, f"not enough stock for product {product.id}: {product.stock} left")
            product.stock -= line.quantity
''', "")

SHOP_SETUP = [
    {"method": "POST", "path": "/customer/", "json": {"name": "Ada", "email": "ada@example.org"}, "expected_status": 200},
    {"method": "POST", "path": "/product/", "json": {"name": "Lamp", "price": 20.0, "stock": 5}, "expected_status": 200},
    {"method": "POST", "path": "/product/", "json": {"name": "Desk", "price": 120.0, "stock": 3}, "expected_status": 200},
]


def _order(lamps: int, desks: int, status: int | list[int]) -> dict:
    lines = [{"product": "{{1.product.id}}", "quantity": lamps}, {"product": "{{2.product.id}}", "quantity": desks}]
    return {"method": "POST", "path": "/order/place/", "json": {"customer": "{{0.customer.id}}", "lines": lines},
            "expected_status": status}


def _stock(index: int, left: int) -> dict:
    return {"method": "GET", "path": f"/product/{{{{{index}.product.id}}}}/", "expected_status": 200,
            "expected_fields": {"product.stock": left}}


def _order_turns(code: str) -> list:
    return turns(
        plan("Add POST /order/place/: create the order and its lines and reduce stock in one transaction"),
        [write("backend/routers/place_order.py", code)],
        wire("routers.place_order", "order"),
        close([("backend/routers/place_order.py",
                "database.add(OrderLine(quantity=line.quantity, order_id=order.id, product_id=product.id))")]),
        end="Orders can be placed.",
    )


PLACE = Task(
    id="shop-place-order",
    model="shop",
    request=("Add POST /order/place/ taking a customer id and lines [{product, quantity}]: it creates the order "
             "(status PENDING, placed today) with its order lines and reduces each product's stock, in one "
             "transaction. If a product has too little stock, answer 409 and change nothing."),
    covers="a custom endpoint changing two entities in one transaction (an order that reduces stock)",
    checks=(
        http("order_placed_with_lines", "an order of two lines is placed and both lines exist",
             [*SHOP_SETUP, _order(2, 1, [200, 201]), {"method": "GET", "path": "/orderline/count/", "expected_status": 200,
                                                       "expected_fields": {"count": 2}},
              {"method": "GET", "path": "/order/count/", "expected_status": 200, "expected_fields": {"count": 1}}]),
        http("stock_reduced", "placing 2 lamps and 1 desk leaves 3 lamps and 2 desks",
             [*SHOP_SETUP, _order(2, 1, [200, 201]), _stock(1, 3), _stock(2, 2)]),
        http("short_stock_refused_atomically", "asking 99 desks answers 409 and leaves no order, no line, the lamps' stock whole",
             [*SHOP_SETUP, _order(2, 99, 409), _stock(1, 5), _stock(2, 3),
              {"method": "GET", "path": "/order/count/", "expected_status": 200, "expected_fields": {"count": 0}},
              {"method": "GET", "path": "/orderline/count/", "expected_status": 200, "expected_fields": {"count": 0}}]),
    ),
    oracle=lambda: _order_turns(PLACE_ORDER),
    wrong=lambda: _order_turns(PLACE_ORDER_NO_STOCK),
    wrong_fails="stock_reduced",
    wrong_does="creates the order and its lines but never reduces stock",
)

TASKS = (PLACE,)
