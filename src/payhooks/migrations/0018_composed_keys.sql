-- payhooks core, version 16: a delivery payhooks composes is one by its key alone.

-- Reconciliation's and confirmation's deliveries (keys under payhooks' reserved `reconcile:`
-- prefix) are built from a status API's answer, never sent again under a key header of
-- someone's choosing: the one-body rule (version 2) does not apply to them. Their key names
-- the payment or refund they are about, so the same bytes under another such key are
-- another payment's delivery, never a copy to answer `duplicate`.
DROP INDEX processed_webhooks_one_body;
CREATE UNIQUE INDEX processed_webhooks_one_body ON processed_webhooks (provider, payload_sha256)
    WHERE first_copy AND event_id NOT LIKE 'reconcile:%';
