-- payhooks core, version 3: the bank reference a customer reads off their statement.

-- UTR, RRN or bank transaction id (a refund's ARN), as the gateway reported it: what a
-- customer quotes when they write "I paid but got no order". For search, never identity.
ALTER TABLE processed_webhooks ADD COLUMN bank_ref text;
CREATE INDEX processed_webhooks_bank_ref ON processed_webhooks (bank_ref)
    WHERE bank_ref IS NOT NULL;
