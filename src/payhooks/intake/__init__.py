"""Taking payments in: the claim, ingest, expectations, confirmations, hooks, stored deliveries and
the payment's record."""
