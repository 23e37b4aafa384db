-- SCALE-3 (director sweep): the director's cursor is the last host it examined, not an offset,
-- so its next page is a keyset read (`host > after_host ORDER BY host LIMIT n`) that costs the
-- same anywhere in the sweep; it is saved after every page. NULL: the start of the list.
--
-- A cursor saved as an offset by an older director cannot be turned into a host (the list it
-- counted has moved on), so it is left in page_offset (no longer read) and its director starts
-- its next sweep from the start of the list once. Harmless: the selection is read-only and a
-- sweep examines every host anyway.
ALTER TABLE ho_director_cursors ADD COLUMN after_host BIGINT CHECK (after_host >= 0);
