-- SCALE-6 (one active director per sweep): the directors sharing a sweep name (`--id`, the
-- name its cursor is kept under) share one lease row; the holder runs passes, the others stand
-- by and take over once it lapses. A claim is a compare-and-set on (holder, epoch); the epoch
-- grows at each change of holder and a cursor save names it, so a holder that lost the lease
-- cannot move the cursor. Times are the writers' Unix milliseconds.
CREATE TABLE ho_sweep_leases (
    sweep TEXT PRIMARY KEY,
    holder BIGINT NOT NULL CHECK (holder >= 0),
    holder_name TEXT NOT NULL,
    until_ms BIGINT NOT NULL CHECK (until_ms >= 0),
    epoch BIGINT NOT NULL CHECK (epoch >= 1)
);
