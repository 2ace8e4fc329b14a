-- Shop, version 17: a Razorpay capture that fails (the gateway's error, the handler raising, a
-- row the database refuses) is recorded on its payment and backed off, so one payment never
-- costs a gateway call every tick and never holds back the others; past a bound of attempts
-- it is an alert (payhooks.service.alerting.captures_failing).
ALTER TABLE payments ADD COLUMN IF NOT EXISTS capture_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN IF NOT EXISTS capture_next_at timestamptz;
ALTER TABLE payments ADD COLUMN IF NOT EXISTS capture_error text;
