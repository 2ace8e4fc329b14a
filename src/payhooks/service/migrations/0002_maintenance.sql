-- payhooks reference shop, version 2: progress of maintenance runs (purge), read by /metrics.
CREATE TABLE maintenance_runs (
    task          text        PRIMARY KEY,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    rows_expected bigint      NOT NULL DEFAULT 0,
    rows_done     bigint      NOT NULL DEFAULT 0
);
