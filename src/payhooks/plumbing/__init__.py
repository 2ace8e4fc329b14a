"""Plumbing: connections, pools, retries, the schema's migrator and the errors every room raises."""
