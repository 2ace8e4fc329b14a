-- payhooks core, version 14: read-only operators, and the console's action log in time order
-- (payhooks.console).

-- A read-only operator may look at every page and act on none: every POST but logging out is
-- refused for them on the server (payhooks.console.pages.csrf). Existing operators keep acting.
ALTER TABLE payhooks_operators ADD COLUMN IF NOT EXISTS read_only boolean NOT NULL DEFAULT false;

-- The action log page reads the newest actions first, by operator or not.
CREATE INDEX IF NOT EXISTS payhooks_console_actions_at ON payhooks_console_actions (at DESC, id DESC);
CREATE INDEX IF NOT EXISTS payhooks_console_actions_operator
    ON payhooks_console_actions (operator, at DESC, id DESC);
