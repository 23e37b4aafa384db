-- HO-L1: a locked reconciliation that fences an attempt whose claimed authority was exact also
-- renews the host's authority (generation + 1) in the same write, and records it as
-- 'fenced_renewed'. A 'fenced' row renewed nothing. The two must be told apart: a drain fence or
-- a registration also bumps the generation by one, so the renewed authority alone does not
-- prove that the fence wrote it.
--
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt (same columns, same
-- rows; nothing references it and it has no index besides its primary key). The migration runs
-- in one transaction.
CREATE TABLE ho_attempts_v3 (
    op_id           TEXT PRIMARY KEY,
    host            INTEGER NOT NULL,
    src_cell        INTEGER NOT NULL,
    src_epoch       INTEGER NOT NULL,
    src_incarnation INTEGER NOT NULL,
    src_generation  INTEGER NOT NULL,
    target          INTEGER NOT NULL,
    outcome         TEXT NOT NULL CHECK (outcome IN ('committed', 'fenced', 'fenced_renewed')),
    new_epoch       INTEGER,
    registration    TEXT CHECK (registration IN ('pending', 'registered', 'recovery')),
    recorded_at_ms  INTEGER NOT NULL,
    CHECK ((outcome = 'committed') = (new_epoch IS NOT NULL AND registration IS NOT NULL))
);
INSERT INTO ho_attempts_v3 (op_id, host, src_cell, src_epoch, src_incarnation, src_generation,
    target, outcome, new_epoch, registration, recorded_at_ms)
SELECT op_id, host, src_cell, src_epoch, src_incarnation, src_generation, target, outcome,
    new_epoch, registration, recorded_at_ms FROM ho_attempts;
DROP TABLE ho_attempts;
ALTER TABLE ho_attempts_v3 RENAME TO ho_attempts;
