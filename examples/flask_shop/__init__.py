"""A shop on Flask and SQLAlchemy whose orders come from payment webhooks (docs/flask.md)."""
