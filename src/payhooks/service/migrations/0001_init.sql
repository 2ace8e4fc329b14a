-- payhooks reference shop, version 1: catalogue, carts, checkouts, payments, orders, outbox.

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
