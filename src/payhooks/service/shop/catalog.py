"""Products and their stock.

A product's stock is split across up to ``STOCK_SLOTS`` rows of ``product_stock``, so that
buyers of one SKU do not all queue on one row lock held through commit (orders.py takes from
one slot at a time). ``products.stock``, a view, is the sum: what is left to sell.
"""

from __future__ import annotations

from dataclasses import dataclass

from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import Conflict
from payhooks.service.shop.ids import record

STOCK_SLOTS = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class Product:
    sku: str
    name: str
    price_paise: int
    stock: int


_INSERT = """
INSERT INTO product_info (sku, name, price_paise) VALUES (%s, %s, %s)
ON CONFLICT (sku) DO NOTHING RETURNING sku
"""
# Slot s of n holds stock // n, plus one for the first stock % n slots.
_SLOTS = """
INSERT INTO product_stock (sku, slot, stock)
SELECT %(sku)s, s, %(stock)s / %(slots)s + (s < %(stock)s %% %(slots)s)::integer
FROM generate_series(0, %(slots)s - 1) AS s
"""
_RESTOCK = """
INSERT INTO inventory_movements (sku, delta, reason) VALUES (%s, %s, 'initial stock')
"""
_GET = "SELECT sku, name, price_paise, stock FROM products WHERE sku = %s"


def slots_for(stock: int, most: int = STOCK_SLOTS) -> int:
    """As many slots as there are units, up to ``most``: no slot starts empty."""
    return max(1, min(most, stock))


def create_product(conn: Connection, product: Product, *, slots: int | None = None) -> Product:
    """Add a product; its opening stock is the first entry of the ledger.

    ``slots`` (default: ``slots_for(stock)``) is how many orders of it can commit at once;
    one slot is the classic design of a single stock row per SKU.
    """
    count = slots or slots_for(product.stock)
    with conn.transaction():
        row = conn.execute(_INSERT, (product.sku, product.name, product.price_paise)).fetchone()
        if row is None:
            raise Conflict(f"product {product.sku!r} exists already")
        conn.execute(_SLOTS, {"sku": product.sku, "stock": product.stock, "slots": count})
        if product.stock:
            conn.execute(_RESTOCK, (product.sku, product.stock))
    return product


def get_product(conn: Connection, sku: str) -> Product:
    return Product(**record(conn, _GET, (sku,), "product"))
