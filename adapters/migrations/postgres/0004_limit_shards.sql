-- HO-S4 at scale (issue #15): the global limits held in escrow over limit shards instead of one
-- ho_limits row that every commit locked across its COMMIT (which kept the durable flushes of
-- two commits from overlapping). The protocol is switchyard_core::handoff::escrow; the store
-- applies it (docs/HANDOFF.md, "Limit shards").
--
-- Each shard row holds its part of every global count and the tokens it may spend alone. A
-- commit that finds a token of every limit on the one shard it locked commits under that lock;
-- otherwise it locks every shard in shard order and decides on the exact sums. 16 shards: more
-- than the concurrent writers a cell's pool runs, so a free shard is nearly always there.
CREATE TABLE ho_limit_shards (
    shard            BIGINT PRIMARY KEY CHECK (shard >= 0),
    window_start_ms  BIGINT NOT NULL,
    commits          BIGINT NOT NULL,
    in_flight        BIGINT NOT NULL,
    attempt_rows     BIGINT NOT NULL,
    commit_tokens    BIGINT NOT NULL CHECK (commit_tokens >= 0),
    in_flight_tokens BIGINT NOT NULL CHECK (in_flight_tokens >= 0),
    attempt_tokens   BIGINT NOT NULL CHECK (attempt_tokens >= 0)
);
-- Every count gathered onto shard 0, no tokens yet (the first commit takes the exact path).
INSERT INTO ho_limit_shards (shard, window_start_ms, commits, in_flight, attempt_rows,
    commit_tokens, in_flight_tokens, attempt_tokens)
SELECT g, l.window_start_ms,
    CASE WHEN g = 0 THEN l.commits ELSE 0 END,
    CASE WHEN g = 0 THEN (SELECT COUNT(*) FROM ho_reservations) ELSE 0 END,
    CASE WHEN g = 0 THEN l.attempt_rows ELSE 0 END,
    0, 0, 0
FROM generate_series(0, 15) AS g, ho_limits l;

-- Per cell and shard: the hosts counted on the shard (a host moved away is subtracted on the
-- shard of the commit that moved it, so one shard's count may be negative; the sum is the
-- cell's load) and the shard's host tokens (may read -1 inside a commit that then rolls back).
-- Written only under the shard's lock. Rows are created with the cell.
CREATE TABLE ho_cell_load (
    cell   BIGINT NOT NULL,
    shard  BIGINT NOT NULL,
    hosts  BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    PRIMARY KEY (cell, shard)
);
INSERT INTO ho_cell_load (cell, shard, hosts, tokens)
SELECT c.cell, s.shard,
    CASE WHEN s.shard = 0 THEN (SELECT COUNT(*) FROM ho_assignments a WHERE a.cell = c.cell)
    ELSE 0 END,
    0
FROM ho_cells c, ho_limit_shards s;

-- The shard that counted a reservation; its release is subtracted there.
ALTER TABLE ho_reservations ADD COLUMN shard BIGINT NOT NULL DEFAULT 0;

DROP TABLE ho_limits;
