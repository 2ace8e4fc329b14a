-- payhooks reference shop, version 6: the operator console.

-- Every webhook request as it was answered, duplicates and refusals included: the console's
-- timelines and its per-gateway health. A log, written in batches after the answer; the
-- records of what took effect stay in processed_webhooks. A refused request keeps no body and
-- no field it claimed about itself (it was not proven authentic): only its size and hash.
CREATE TABLE deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    received_at  timestamptz NOT NULL,
    provider     text        NOT NULL,
    status       smallint    NOT NULL,
    outcome      text        NOT NULL,
    verified     boolean     NOT NULL,
    event_id     text,
    event_type   text,
    payment_id   text,
    merchant_ref text,
    mismatch     boolean     NOT NULL DEFAULT false,
    body_bytes   integer     NOT NULL,
    body_sha256  text,
    detail       text,
    duration_ms  real        NOT NULL
);
CREATE INDEX deliveries_received_at ON deliveries (received_at);
CREATE INDEX deliveries_reference ON deliveries (provider, merchant_ref)
    WHERE merchant_ref IS NOT NULL;
CREATE INDEX deliveries_payment ON deliveries (provider, payment_id)
    WHERE payment_id IS NOT NULL;
CREATE INDEX deliveries_key ON deliveries (provider, event_id) WHERE event_id IS NOT NULL;

-- What the console searches by, besides primary keys.
CREATE INDEX carts_customer_email ON carts (lower(customer_email));
CREATE INDEX outbox_order ON outbox ((payload ->> 'order_id')) WHERE payload ? 'order_id';
CREATE INDEX outbox_payment ON outbox ((payload ->> 'payment_id')) WHERE payload ? 'payment_id';
CREATE INDEX outbox_event ON outbox ((payload ->> 'event_id')) WHERE payload ? 'event_id';

-- Operators: a name and a scrypt hash; `payhooks operator add` writes them.
CREATE TABLE operators (
    name          text        PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- Sessions by the sha256 of their token (the cookie holds the token, signed); each has its own
-- CSRF token. Logging out deletes the row; removing an operator ends their sessions.
CREATE TABLE console_sessions (
    token_sha256 text        PRIMARY KEY,
    operator     text        NOT NULL REFERENCES operators (name) ON DELETE CASCADE,
    csrf_token   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX console_sessions_expires_at ON console_sessions (expires_at);

-- Failed logins, by operator name and by client address, for the rate limit.
CREATE TABLE console_login_failures (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name      text        NOT NULL,
    client    text        NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_login_failures_name ON console_login_failures (name, failed_at);
CREATE INDEX console_login_failures_client ON console_login_failures (client, failed_at);

-- The key that signs session cookies: made once, shared by every `payhooks serve`.
CREATE TABLE console_keys (
    id         smallint    PRIMARY KEY CHECK (id = 1),
    secret     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Who did what from the console (replays, retries), shown on the timelines.
CREATE TABLE console_actions (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    operator text        NOT NULL,
    action   text        NOT NULL,
    provider text,
    target   text        NOT NULL,
    result   text        NOT NULL
);
CREATE INDEX console_actions_target ON console_actions (target);
