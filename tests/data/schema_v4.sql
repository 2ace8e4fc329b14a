-- The schema as payhooks 0.1.0 left it (migrations 0001 to 0004), for upgrade tests.

-- 0001_init
-- payhooks schema, version 1.

-- One row per delivery key: the claim. The design's columns and key, plus what tracing and
-- replay need.
CREATE TABLE processed_webhooks (
    provider        text        NOT NULL,
    event_id        text        NOT NULL,
    order_ref       text,
    processed_at    timestamptz NOT NULL DEFAULT now(),
    event_type      text        NOT NULL,
    outcome         text        NOT NULL CHECK (outcome IN ('processed', 'ignored', 'parked')),
    payment_id      text,
    payload_sha256  text        NOT NULL,
    body            bytea       NOT NULL,
    headers         jsonb       NOT NULL DEFAULT '{}',
    mismatches      integer     NOT NULL DEFAULT 0,
    last_mismatch_at timestamptz,
    PRIMARY KEY (provider, event_id)
);
CREATE INDEX processed_webhooks_processed_at ON processed_webhooks (processed_at);
CREATE INDEX processed_webhooks_payment ON processed_webhooks (provider, payment_id)
    WHERE payment_id IS NOT NULL;
CREATE INDEX processed_webhooks_order_ref ON processed_webhooks (order_ref)
    WHERE order_ref IS NOT NULL;
CREATE INDEX processed_webhooks_parked ON processed_webhooks (processed_at)
    WHERE outcome = 'parked';

CREATE TABLE products (
    sku         text    PRIMARY KEY,
    name        text    NOT NULL,
    price_paise bigint  NOT NULL CHECK (price_paise >= 0),
    stock       integer NOT NULL CHECK (stock >= 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Append-only: every change of stock, with its reason and order.
CREATE TABLE inventory_movements (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku        text    NOT NULL REFERENCES products (sku),
    delta      integer NOT NULL,
    reason     text    NOT NULL,
    order_id   text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inventory_movements_sku ON inventory_movements (sku);
CREATE UNIQUE INDEX inventory_movements_one_sale ON inventory_movements (order_id, sku)
    WHERE reason = 'sale';

CREATE TABLE carts (
    id             text   PRIMARY KEY,
    customer_email text   NOT NULL,
    amount_paise   bigint NOT NULL CHECK (amount_paise >= 0),
    currency       text   NOT NULL DEFAULT 'INR',
    status         text   NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    paid_at        timestamptz
);

CREATE TABLE cart_items (
    cart_id     text    NOT NULL REFERENCES carts (id),
    sku         text    NOT NULL REFERENCES products (sku),
    quantity    integer NOT NULL CHECK (quantity > 0),
    price_paise bigint  NOT NULL,
    PRIMARY KEY (cart_id, sku)
);

-- The reference the gateway echoes back, per provider.
CREATE TABLE checkouts (
    provider         text NOT NULL,
    gateway_order_id text NOT NULL,
    cart_id          text NOT NULL REFERENCES carts (id),
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, gateway_order_id),
    UNIQUE (cart_id, provider)
);

-- One row per payment attempt.
CREATE TABLE payments (
    provider             text   NOT NULL,
    payment_id           text   NOT NULL,
    cart_id              text   REFERENCES carts (id),
    status               text   NOT NULL
        CHECK (status IN ('created', 'authorized', 'captured', 'refunded', 'failed')),
    amount_paise         bigint,
    payment_amount_paise bigint,
    currency             text,
    refunded_paise       bigint  NOT NULL DEFAULT 0,
    needs_refund         boolean NOT NULL DEFAULT false,
    flags                text[]  NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, payment_id)
);
CREATE INDEX payments_cart ON payments (cart_id);

CREATE TABLE refunds (
    provider     text   NOT NULL,
    refund_id    text   NOT NULL,
    payment_id   text   NOT NULL,
    amount_paise bigint NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, refund_id)
);

CREATE TABLE orders (
    id           text   PRIMARY KEY,
    cart_id      text   NOT NULL UNIQUE REFERENCES carts (id),
    provider     text   NOT NULL,
    payment_id   text   NOT NULL,
    amount_paise bigint NOT NULL,
    status       text   NOT NULL CHECK (status IN ('confirmed', 'backordered')),
    event_id     text   NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- Side effects that leave the database, written in the same transaction as their cause.
CREATE TABLE outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         text   NOT NULL CHECK (kind IN ('email', 'alert')),
    dedupe_key   text   NOT NULL UNIQUE,
    recipient    text,
    subject      text   NOT NULL,
    body         text   NOT NULL,
    payload      jsonb  NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    available_at timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    sent_at      timestamptz,
    failed_at    timestamptz,
    last_error   text
);
CREATE INDEX outbox_pending ON outbox (available_at) WHERE sent_at IS NULL AND failed_at IS NULL;

-- 0002_maintenance
-- payhooks schema, version 2: progress of maintenance runs (purge), read by /metrics.
CREATE TABLE maintenance_runs (
    task          text        PRIMARY KEY,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    rows_expected bigint      NOT NULL DEFAULT 0,
    rows_done     bigint      NOT NULL DEFAULT 0
);

-- 0003_stock_slots
-- payhooks schema, version 3: a product's stock is split across slots.
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

-- 0004_outbox_indexes
-- payhooks schema, version 4: the outbox's sent and dead rows are found without a scan
-- (retention deletes old sent rows; /metrics counts dead letters on every scrape).
CREATE INDEX outbox_sent_at ON outbox (sent_at) WHERE sent_at IS NOT NULL;
CREATE INDEX outbox_failed_at ON outbox (failed_at) WHERE failed_at IS NOT NULL;
