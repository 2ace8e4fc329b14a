-- payhooks core, version 13: a refund the gateway accepted and has not yet said is processed
-- is asked about again (payhooks.sending.check_due), so an intent whose refund webhook never
-- came, or came before the sender recorded the gateway's answer, still closes.

-- What the checker leases: the sent, by when they are due to be asked about.
CREATE INDEX IF NOT EXISTS payhooks_refunds_unsettled
    ON payhooks_refunds (provider, next_attempt_at) WHERE state = 'sent';
