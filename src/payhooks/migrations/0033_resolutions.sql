-- payhooks core, version 33: a parked delivery settled by a person, whatever it was parked for.
--
-- A delivery parked for another reason than its amount (a refund or a dispute of a payment
-- the merchant's app never took, a payment for no checkout) that will never apply stayed
-- parked for ever: `payhooks resolve` took amount mismatches only, and the parked alert
-- could not be cleared. It now records such a delivery `ignored` and keeps the person's words
-- here (an amount mismatch keeps them on its own row, version 5). Kept, like the mismatches:
-- a person's account of money settled by hand outlives the delivery's record.
CREATE TABLE IF NOT EXISTS payhooks_resolutions (
    provider    text        NOT NULL,
    event_id    text        NOT NULL,
    resolution  text        NOT NULL,
    resolved_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, event_id)
);
