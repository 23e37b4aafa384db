-- HO-L4 (history bounded by retention): the director removes ended attempt records older than
-- its retention, oldest first (recorded_at_ms, then op_id), a bounded batch per pass. This
-- index makes that pick read only the rows it removes (and the few pending ones among them)
-- instead of the whole table. Building it on an existing table reads every attempt row once.
CREATE INDEX ho_attempts_recorded ON ho_attempts (recorded_at_ms, op_id);
