-- payhooks core, version 25: the events a broker refused, for a relay to pass over.
--
-- An event the broker refused backs off alone (next_attempt_at), holding back its payment's
-- later events and no other payment's. A pass reads its window of the channel's unpublished
-- events in queue order, less the events of payments whose refused one is not due yet, which
-- it finds through this index without reading the whole backlog: an event is tried more than
-- once only when it was refused (an unanswered one is marked nothing), so these are few.
CREATE INDEX IF NOT EXISTS payhooks_outbox_relay_refused
    ON payhooks_outbox (channel, next_attempt_at)
    WHERE kind = 'event' AND sent_at IS NULL AND attempts > 0;
