"""Money out: refund intents (the record of a refund payhooks asked for) and the sender."""
