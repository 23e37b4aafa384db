-- HO-L1: a locked reconciliation that fences an attempt whose claimed authority was exact also
-- renews the host's authority (generation + 1) in the same write, and records it as
-- 'fenced_renewed'. A 'fenced' row renewed nothing. The two must be told apart: a drain fence or
-- a registration also bumps the generation by one, so the renewed authority alone does not
-- prove that the fence wrote it.
ALTER TABLE ho_attempts DROP CONSTRAINT ho_attempts_outcome_check;
ALTER TABLE ho_attempts ADD CONSTRAINT ho_attempts_outcome_check
    CHECK (outcome IN ('committed', 'fenced', 'fenced_renewed'));
