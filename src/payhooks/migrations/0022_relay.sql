-- payhooks core, version 22: payment events relayed to a message broker (NATS JetStream,
-- RabbitMQ) through the one outbound queue (payhooks_outbox; docs/design.md, "The relay").

-- The channels a relay runs for ('nats', 'rabbitmq'), added by `payhooks relay` when it starts.
-- While a channel is here, every payment event a claim applies queues one row for it, in the
-- claim's transaction; with none here, a claim writes nothing more than before. A relay holds
-- its channel's row (FOR NO KEY UPDATE) while it publishes a batch: one relay publishes a
-- channel at a time, and one killed lets it go at once.
CREATE TABLE IF NOT EXISTS payhooks_relay_channels (
    channel  text        PRIMARY KEY,
    added_at timestamptz NOT NULL DEFAULT now()
);

-- A payment event is a row of kind 'event' on its broker's channel: dedupe_key is
-- 'relay:<channel>:<message id>' (one row per logical event and channel, however many
-- deliveries carried it), subject the event's place on the broker (<gateway>.<kind>), body the
-- message, payload its message id and the payment whose order it keeps.
ALTER TABLE payhooks_outbox DROP CONSTRAINT IF EXISTS payhooks_outbox_kind_check;
ALTER TABLE payhooks_outbox ADD CONSTRAINT payhooks_outbox_kind_check
    CHECK (kind IN ('email', 'alert', 'raised', 'repeated', 'resolved', 'event'));

-- The senders of emails and notices read their due rows through this index; events, which a
-- broker outage can pile up by the hundred thousand, are kept out of their way.
DROP INDEX IF EXISTS payhooks_outbox_due;
CREATE INDEX payhooks_outbox_due ON payhooks_outbox (next_attempt_at)
    WHERE sent_at IS NULL AND failed_at IS NULL AND kind <> 'event';
-- A relay reads its channel's unpublished events in the order they were queued.
CREATE INDEX payhooks_outbox_relay ON payhooks_outbox (channel, id)
    WHERE kind = 'event' AND sent_at IS NULL;
