-- payhooks core, version 7: the operator console's own door, for any app (payhooks.console).

-- Operators: a name and a scrypt hash; `payhooks operator add` writes them.
CREATE TABLE IF NOT EXISTS payhooks_operators (
    name          text        PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- Sessions by the sha256 of their token (the cookie holds the token, signed); each has its own
-- CSRF token. Logging out deletes the row; removing an operator ends their sessions.
CREATE TABLE IF NOT EXISTS payhooks_console_sessions (
    token_sha256 text        PRIMARY KEY,
    operator     text        NOT NULL REFERENCES payhooks_operators (name) ON DELETE CASCADE,
    csrf_token   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS payhooks_console_sessions_expires_at
    ON payhooks_console_sessions (expires_at);
CREATE INDEX IF NOT EXISTS payhooks_console_sessions_operator
    ON payhooks_console_sessions (operator);

-- Failed logins, by operator name and by client address, for the rate limit.
CREATE TABLE IF NOT EXISTS payhooks_console_login_failures (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name      text        NOT NULL,
    client    text        NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS payhooks_console_login_failures_name
    ON payhooks_console_login_failures (name, failed_at);
CREATE INDEX IF NOT EXISTS payhooks_console_login_failures_client
    ON payhooks_console_login_failures (client, failed_at);

-- The key that signs session cookies: made once, shared by every process serving the console.
CREATE TABLE IF NOT EXISTS payhooks_console_keys (
    id         smallint    PRIMARY KEY CHECK (id = 1),
    secret     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Who did what from the console (replays, settlements, retries), shown on the timelines.
CREATE TABLE IF NOT EXISTS payhooks_console_actions (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    operator text        NOT NULL,
    action   text        NOT NULL,
    provider text,
    target   text        NOT NULL,
    result   text        NOT NULL
);
CREATE INDEX IF NOT EXISTS payhooks_console_actions_target ON payhooks_console_actions (target);
