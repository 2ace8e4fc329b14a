-- payhooks reference shop, version 3: a product's stock is split across slots.
--
-- One stock row per SKU, locked by every order until it commits, queues every buyer of a
-- popular SKU behind one row lock held through commit. Each order now takes its quantity from
-- one slot that has enough (skipping slots other orders hold), so buyers of one SKU commit
-- side by side. No slot goes below zero, so neither does their sum; `products` stays the
-- interface readers know, its `stock` being that sum.
ALTER TABLE products RENAME TO product_info;

CREATE TABLE product_stock (
    sku   text     NOT NULL REFERENCES product_info (sku),
    slot  smallint NOT NULL CHECK (slot >= 0),
    stock integer  NOT NULL CHECK (stock >= 0),
    PRIMARY KEY (sku, slot)
);

INSERT INTO product_stock (sku, slot, stock)
SELECT p.sku, s.slot, p.stock / n.slots + (s.slot < p.stock % n.slots)::integer
FROM product_info p
CROSS JOIN LATERAL (SELECT greatest(1, least(8, p.stock)) AS slots) n
CROSS JOIN LATERAL generate_series(0, n.slots - 1) AS s (slot);

ALTER TABLE product_info DROP COLUMN stock;

CREATE VIEW products AS
SELECT i.sku, i.name, i.price_paise,
       (SELECT coalesce(sum(s.stock), 0) FROM product_stock s WHERE s.sku = i.sku)::integer
           AS stock,
       i.created_at
FROM product_info i;
