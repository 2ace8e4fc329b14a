-- payhooks core, version 34: a webhook credential is never stored with a delivery.
--
-- PhonePe's Authorization header (the sha256 of the webhook's username:password) was kept with
-- each callback's body, as the headers an adapter reads are: anyone reading the database, a
-- backup or the console's headers page could post accepted callbacks with it. The header is
-- now read and never kept (payhooks.gateways._adapter.UNKEPT_HEADERS); what was kept goes.
UPDATE processed_webhooks SET headers = headers - 'authorization'
WHERE headers ? 'authorization';
