-- HO-S4 (issue #15): the limits as limit shards, as on PostgreSQL (see its 0004 migration and
-- switchyard_core::handoff::escrow). SQLite has one writer at a time (BEGIN IMMEDIATE), so one
-- shard: the same code path, nothing to spread.
CREATE TABLE ho_limit_shards (
    shard            INTEGER PRIMARY KEY CHECK (shard >= 0),
    window_start_ms  INTEGER NOT NULL,
    commits          INTEGER NOT NULL,
    in_flight        INTEGER NOT NULL,
    attempt_rows     INTEGER NOT NULL,
    commit_tokens    INTEGER NOT NULL CHECK (commit_tokens >= 0),
    in_flight_tokens INTEGER NOT NULL CHECK (in_flight_tokens >= 0),
    attempt_tokens   INTEGER NOT NULL CHECK (attempt_tokens >= 0)
);
INSERT INTO ho_limit_shards (shard, window_start_ms, commits, in_flight, attempt_rows,
    commit_tokens, in_flight_tokens, attempt_tokens)
SELECT 0, window_start_ms, commits, (SELECT COUNT(*) FROM ho_reservations), attempt_rows, 0, 0, 0
FROM ho_limits;

CREATE TABLE ho_cell_load (
    cell   INTEGER NOT NULL,
    shard  INTEGER NOT NULL,
    hosts  INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (cell, shard)
);
INSERT INTO ho_cell_load (cell, shard, hosts, tokens)
SELECT c.cell, s.shard,
    CASE WHEN s.shard = 0 THEN (SELECT COUNT(*) FROM ho_assignments a WHERE a.cell = c.cell)
    ELSE 0 END,
    0
FROM ho_cells c, ho_limit_shards s;

ALTER TABLE ho_reservations ADD COLUMN shard INTEGER NOT NULL DEFAULT 0;

DROP TABLE ho_limits;
