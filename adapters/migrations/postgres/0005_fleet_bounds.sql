-- SCALE-1 (issue #24): the store's size bounds are settings, one value for the deployment, so
-- every process refuses at the same point and a change revokes the tokens dealt under the old
-- value. Defaults: StoreBounds::FLEET (sized for 1,000,000 hosts over 100 cells). A store
-- created before held at most 65,536 hosts and 1,048,576 attempt rows; both rise.
ALTER TABLE ho_settings ADD COLUMN max_hosts BIGINT NOT NULL DEFAULT 4194304
    CHECK (max_hosts > 0);
ALTER TABLE ho_settings ADD COLUMN max_cells BIGINT NOT NULL DEFAULT 1024
    CHECK (max_cells > 0);
ALTER TABLE ho_settings ADD COLUMN max_attempt_rows BIGINT NOT NULL DEFAULT 16777216
    CHECK (max_attempt_rows > 0);

-- SCALE-2: the host count is escrowed over the limit shards (switchyard_core::handoff::escrow,
-- `enrol_path`): an enrolment locks one free shard and counts its host there, spending one of
-- the shard's host tokens (room under max_hosts), so it needs no COUNT(*) over ho_assignments
-- and no lock on every shard. Hosts are never deleted, so a shard's count never goes negative.
-- The existing hosts are counted on shard 0; no tokens yet (the first enrolment deals them).
ALTER TABLE ho_limit_shards ADD COLUMN hosts BIGINT NOT NULL DEFAULT 0 CHECK (hosts >= 0);
ALTER TABLE ho_limit_shards ADD COLUMN host_tokens BIGINT NOT NULL DEFAULT 0
    CHECK (host_tokens >= 0);
UPDATE ho_limit_shards SET hosts = (SELECT COUNT(*) FROM ho_assignments) WHERE shard = 0;
