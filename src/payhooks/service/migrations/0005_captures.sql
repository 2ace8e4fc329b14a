-- payhooks reference shop, version 5: captures apart from status.

-- A payment's capture is a fact of its own, apart from its status: a refund may arrive (and
-- set the status) before the capture it refunds, and that capture must still be accounted for.
ALTER TABLE payments ADD COLUMN captured_at timestamptz;
UPDATE payments p SET captured_at = p.updated_at
WHERE p.status = 'captured'
   OR p.flags <> '{}'
   OR EXISTS (SELECT 1 FROM orders o WHERE o.provider = p.provider AND o.payment_id = p.payment_id);

-- The worker looks for parked deliveries from the checkouts and payments made since its last
-- pass, never by reading every parked delivery: those that match nothing can be millions.
CREATE INDEX checkouts_created_at ON checkouts (created_at);
CREATE INDEX payments_created_at ON payments (created_at);
