-- HO-L2: one live process per cell id. A starting process takes the cell only when the lease
-- of the last one has ended (Unix ms); a running process renews it, a graceful stop ends it.
ALTER TABLE ho_cells ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0 CHECK (lease_until >= 0);
