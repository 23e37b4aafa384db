-- Idle handoff (HO) assignment store, SQLite (the embedded default). Same tables as
-- postgres/0001_handoff.sql; see docs/HANDOFF.md. Integers are INTEGER (booleans 0/1) so that
-- one sqlx `Any` code path reads both backends. Every write transaction is BEGIN IMMEDIATE
-- (the single writer lock is the host lock), with a busy timeout.

-- The persistent switch and tunables (StoreConfig). One row.
CREATE TABLE ho_settings (
    id                       INTEGER PRIMARY KEY CHECK (id = 1),
    enabled                  INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    freshness_window_ms      INTEGER NOT NULL CHECK (freshness_window_ms >= 0),
    host_cooldown_ms         INTEGER NOT NULL CHECK (host_cooldown_ms >= 0),
    max_in_flight_migrations INTEGER NOT NULL CHECK (max_in_flight_migrations >= 0),
    rate_window_ms           INTEGER NOT NULL CHECK (rate_window_ms >= 0),
    max_commits_per_window   INTEGER NOT NULL CHECK (max_commits_per_window >= 0),
    registration_timeout_ms  INTEGER NOT NULL CHECK (registration_timeout_ms >= 0)
);

-- HO-S4: global rate window and the attempt-row count; locked (last) by every commit and
-- fence, which serialises the global limits.
CREATE TABLE ho_limits (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    window_start_ms INTEGER NOT NULL,
    commits         INTEGER NOT NULL CHECK (commits >= 0),
    attempt_rows    INTEGER NOT NULL CHECK (attempt_rows >= 0)
);
INSERT INTO ho_limits (id, window_start_ms, commits, attempt_rows) VALUES (1, 0, 0, 0);

-- Cells: capacity, HO-C1 capability, current process incarnation, where to reach them.
CREATE TABLE ho_cells (
    cell            INTEGER PRIMARY KEY CHECK (cell >= 0),
    capacity        INTEGER NOT NULL CHECK (capacity >= 0),
    handoff_capable INTEGER NOT NULL CHECK (handoff_capable IN (0, 1)),
    incarnation     INTEGER NOT NULL CHECK (incarnation >= 0),
    public_url      TEXT NOT NULL DEFAULT '',
    internal_url    TEXT NOT NULL DEFAULT ''
);

-- Hosts and their assignment: the host lock is this row.
CREATE TABLE ho_assignments (
    host            INTEGER PRIMARY KEY CHECK (host >= 0),
    cell            INTEGER NOT NULL REFERENCES ho_cells (cell),
    epoch           INTEGER NOT NULL CHECK (epoch >= 0),
    incarnation     INTEGER NOT NULL CHECK (incarnation >= 0),
    generation      INTEGER NOT NULL CHECK (generation >= 0),
    desktop_capable INTEGER NOT NULL CHECK (desktop_capable IN (0, 1))
);
CREATE INDEX ho_assignments_by_cell ON ho_assignments (cell);

-- Target reservations of committed, not yet registered migrations (one per host at most).
CREATE TABLE ho_reservations (
    op_id         TEXT PRIMARY KEY,
    host          INTEGER NOT NULL UNIQUE,
    cell          INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
);
CREATE INDEX ho_reservations_by_expiry ON ho_reservations (expires_at_ms);

-- HO-A1: migration attempts by operation id (unique). 'fenced' rows are written by a locked
-- reconciliation that found no attempt, so a late original commit fails its re-check.
CREATE TABLE ho_attempts (
    op_id           TEXT PRIMARY KEY,
    host            INTEGER NOT NULL,
    src_cell        INTEGER NOT NULL,
    src_epoch       INTEGER NOT NULL,
    src_incarnation INTEGER NOT NULL,
    src_generation  INTEGER NOT NULL,
    target          INTEGER NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('committed', 'fenced')),
    new_epoch       INTEGER,
    registration    TEXT CHECK (registration IN ('pending', 'registered', 'recovery')),
    recorded_at_ms  INTEGER NOT NULL,
    CHECK ((outcome = 'committed') = (new_epoch IS NOT NULL AND registration IS NOT NULL))
);

-- HO-3: per-host cooldown after a committed move.
CREATE TABLE ho_cooldowns (
    host     INTEGER PRIMARY KEY,
    until_ms INTEGER NOT NULL
);

-- Desktop control activity leases (HO-10: never idleness evidence; released at retire).
CREATE TABLE ho_activity (
    host          INTEGER PRIMARY KEY,
    cell          INTEGER NOT NULL,
    generation    INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
);

-- HO-3: the desktop's latest measurement of its current region and best target.
CREATE TABLE ho_measurements (
    host           INTEGER PRIMARY KEY,
    target         INTEGER NOT NULL,
    measured_at_ms INTEGER NOT NULL,
    current_rtt_ms INTEGER NOT NULL CHECK (current_rtt_ms >= 0),
    target_rtt_ms  INTEGER NOT NULL CHECK (target_rtt_ms >= 0)
);

-- HO-S2: each director's rotating page offset (survives restarts).
CREATE TABLE ho_director_cursors (
    director    TEXT PRIMARY KEY,
    page_offset INTEGER NOT NULL CHECK (page_offset >= 0)
);
