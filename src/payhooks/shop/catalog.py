"""Products and their stock."""

from __future__ import annotations

from dataclasses import dataclass

from payhooks.db import Connection
from payhooks.errors import Conflict, NotFound


@dataclass(frozen=True, slots=True, kw_only=True)
class Product:
    sku: str
    name: str
    price_paise: int
    stock: int


_INSERT = """
INSERT INTO products (sku, name, price_paise, stock) VALUES (%s, %s, %s, %s)
ON CONFLICT (sku) DO NOTHING RETURNING sku
"""
_RESTOCK = """
INSERT INTO inventory_movements (sku, delta, reason) VALUES (%s, %s, 'initial stock')
"""
_GET = "SELECT sku, name, price_paise, stock FROM products WHERE sku = %s"


def create_product(conn: Connection, product: Product) -> Product:
    """Add a product; its opening stock is the first entry of the ledger."""
    with conn.transaction():
        row = conn.execute(
            _INSERT, (product.sku, product.name, product.price_paise, product.stock)
        ).fetchone()
        if row is None:
            raise Conflict(f"product {product.sku!r} exists already")
        if product.stock:
            conn.execute(_RESTOCK, (product.sku, product.stock))
    return product


def get_product(conn: Connection, sku: str) -> Product:
    row = conn.execute(_GET, (sku,)).fetchone()
    if row is None:
        raise NotFound("product", sku)
    return Product(sku=row[0], name=row[1], price_paise=row[2], stock=row[3])
