-- Idle handoff (HO) assignment store, PostgreSQL. Mirrors `switchyard_core::handoff::store`
-- row for row; see docs/HANDOFF.md. Integers are BIGINT (booleans 0/1) so that one sqlx `Any`
-- code path reads both backends. Lock order of every transaction: the host's
-- ho_assignments row first, then its ho_cells row, then the ho_limits row.

-- The persistent switch and tunables (StoreConfig). One row.
CREATE TABLE ho_settings (
    id                       BIGINT PRIMARY KEY CHECK (id = 1),
    enabled                  BIGINT NOT NULL CHECK (enabled IN (0, 1)),
    freshness_window_ms      BIGINT NOT NULL CHECK (freshness_window_ms >= 0),
    host_cooldown_ms         BIGINT NOT NULL CHECK (host_cooldown_ms >= 0),
    max_in_flight_migrations BIGINT NOT NULL CHECK (max_in_flight_migrations >= 0),
    rate_window_ms           BIGINT NOT NULL CHECK (rate_window_ms >= 0),
    max_commits_per_window   BIGINT NOT NULL CHECK (max_commits_per_window >= 0),
    registration_timeout_ms  BIGINT NOT NULL CHECK (registration_timeout_ms >= 0)
);

-- HO-S4: global rate window and the attempt-row count; locked (last) by every commit and
-- fence, which serialises the global limits.
CREATE TABLE ho_limits (
    id              BIGINT PRIMARY KEY CHECK (id = 1),
    window_start_ms BIGINT NOT NULL,
    commits         BIGINT NOT NULL CHECK (commits >= 0),
    attempt_rows    BIGINT NOT NULL CHECK (attempt_rows >= 0)
);
INSERT INTO ho_limits (id, window_start_ms, commits, attempt_rows) VALUES (1, 0, 0, 0);

-- Cells: capacity, HO-C1 capability, current process incarnation, where to reach them.
CREATE TABLE ho_cells (
    cell            BIGINT PRIMARY KEY CHECK (cell >= 0),
    capacity        BIGINT NOT NULL CHECK (capacity >= 0),
    handoff_capable BIGINT NOT NULL CHECK (handoff_capable IN (0, 1)),
    incarnation     BIGINT NOT NULL CHECK (incarnation >= 0),
    public_url      TEXT NOT NULL DEFAULT '',
    internal_url    TEXT NOT NULL DEFAULT ''
);

-- Hosts and their assignment: the host lock is this row.
CREATE TABLE ho_assignments (
    host            BIGINT PRIMARY KEY CHECK (host >= 0),
    cell            BIGINT NOT NULL REFERENCES ho_cells (cell),
    epoch           BIGINT NOT NULL CHECK (epoch >= 0),
    incarnation     BIGINT NOT NULL CHECK (incarnation >= 0),
    generation      BIGINT NOT NULL CHECK (generation >= 0),
    desktop_capable BIGINT NOT NULL CHECK (desktop_capable IN (0, 1))
);
CREATE INDEX ho_assignments_by_cell ON ho_assignments (cell);

-- Target reservations of committed, not yet registered migrations (one per host at most).
CREATE TABLE ho_reservations (
    op_id         TEXT PRIMARY KEY,
    host          BIGINT NOT NULL UNIQUE,
    cell          BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
CREATE INDEX ho_reservations_by_expiry ON ho_reservations (expires_at_ms);

-- HO-A1: migration attempts by operation id (unique). 'fenced' rows are written by a locked
-- reconciliation that found no attempt, so a late original commit fails its re-check.
CREATE TABLE ho_attempts (
    op_id           TEXT PRIMARY KEY,
    host            BIGINT NOT NULL,
    src_cell        BIGINT NOT NULL,
    src_epoch       BIGINT NOT NULL,
    src_incarnation BIGINT NOT NULL,
    src_generation  BIGINT NOT NULL,
    target          BIGINT NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('committed', 'fenced')),
    new_epoch       BIGINT,
    registration    TEXT CHECK (registration IN ('pending', 'registered', 'recovery')),
    recorded_at_ms  BIGINT NOT NULL,
    CHECK ((outcome = 'committed') = (new_epoch IS NOT NULL AND registration IS NOT NULL))
);

-- HO-3: per-host cooldown after a committed move.
CREATE TABLE ho_cooldowns (
    host     BIGINT PRIMARY KEY,
    until_ms BIGINT NOT NULL
);

-- Desktop control activity leases (HO-10: never idleness evidence; released at retire).
CREATE TABLE ho_activity (
    host          BIGINT PRIMARY KEY,
    cell          BIGINT NOT NULL,
    generation    BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);

-- HO-3: the desktop's latest measurement of its current region and best target.
CREATE TABLE ho_measurements (
    host           BIGINT PRIMARY KEY,
    target         BIGINT NOT NULL,
    measured_at_ms BIGINT NOT NULL,
    current_rtt_ms BIGINT NOT NULL CHECK (current_rtt_ms >= 0),
    target_rtt_ms  BIGINT NOT NULL CHECK (target_rtt_ms >= 0)
);

-- HO-S2: each director's rotating page offset (survives restarts).
CREATE TABLE ho_director_cursors (
    director    TEXT PRIMARY KEY,
    page_offset BIGINT NOT NULL CHECK (page_offset >= 0)
);
