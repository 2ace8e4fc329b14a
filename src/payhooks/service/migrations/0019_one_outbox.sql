-- Shop, version 19: the shop's emails and alerts join the core's queue (payhooks_outbox,
-- core version 21), every row moved with its id (the console's log and `payhooks outbox
-- --retry ID` name it); the notices already there are numbered after them.
-- "outbox" stays as the shop's view of it: its messages, alert_key NULL, under the names
-- they had (the first capture's function and the console write through it).
UPDATE payhooks_outbox SET id = -id;
UPDATE payhooks_outbox SET id = -id + (SELECT coalesce(max(id), 0) FROM outbox);
INSERT INTO payhooks_outbox (id, dedupe_key, kind, channel, recipient, subject, body, payload,
                             created_at, next_attempt_at, attempts, last_error, sent_at,
                             failed_at)
SELECT id, dedupe_key, kind, 'email', recipient, subject, body, payload, created_at,
       available_at, attempts, last_error, sent_at, failed_at
FROM outbox ORDER BY id;
SELECT setval(pg_get_serial_sequence('payhooks_outbox', 'id'),
              coalesce((SELECT max(id) FROM payhooks_outbox), 0) + 1, false);
DROP TABLE outbox;

CREATE VIEW outbox AS
SELECT id, kind, dedupe_key, recipient, subject, body, payload, created_at,
       next_attempt_at AS available_at, attempts, sent_at, failed_at, last_error
FROM payhooks_outbox WHERE alert_key IS NULL;

-- What the console's search and stories look up in a message's payload.
CREATE INDEX payhooks_outbox_order ON payhooks_outbox ((payload ->> 'order_id'))
    WHERE payload ? 'order_id';
CREATE INDEX payhooks_outbox_payment ON payhooks_outbox ((payload ->> 'payment_id'))
    WHERE payload ? 'payment_id';
CREATE INDEX payhooks_outbox_event ON payhooks_outbox ((payload ->> 'event_id'))
    WHERE payload ? 'event_id';
