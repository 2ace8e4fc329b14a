-- payhooks core, version 26: the settlement report lines payhooks cannot read
-- (payhooks.settlements, docs/design.md, "Settlements").
--
-- A report line payhooks cannot read (an amount that is not one, a fee or tax missing) is kept
-- here for a person, with why and the line as the gateway answered it, and the rest of its
-- report is recorded: one line never stops a fetch. What it names (its payout, its entry, its
-- payment) is kept as far as it reads. The same line met again, by the next fetch of its day,
-- is kept once, as last answered (digest: SHA-256 of its payout and entry when it names both,
-- else of the line as answered); one a later fetch reads (the gateway corrected it, or a
-- payhooks that reads it) leaves. Never purged: money data, as the lines.
--
-- (A payout's state is now ranked pending, settled, failed, reversed, in
-- payhooks.settlements.records, not as version 24's comment has it: a failure told after a
-- report line's "settled" wins. The rank lives in the code; no column changes.)
CREATE TABLE IF NOT EXISTS payhooks_settlement_unreadable (
    provider      text        NOT NULL,
    digest        text        NOT NULL,
    settlement_id text,
    entry_id      text,
    payment_id    text,
    reason        text        NOT NULL,
    raw           text        NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    seen_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, digest)
);
