-- Jids, queue names and worker ids are identifiers, not words: they compare byte by byte. Under
-- the database's default collation every comparison in their indexes (the primary key, the claim
-- order, the admin listings) went through the locale's strcoll, which copies both strings first.
-- The only visible difference is the order of listings sorted by these columns (byte order: "B"
-- before "a"). Changing a column's collation rebuilds its indexes; the rows are not rewritten. The
-- job table is locked meanwhile, for a time that grows with its size.
ALTER TABLE werk_jobs
    ALTER COLUMN jid TYPE text COLLATE "C",
    ALTER COLUMN queue TYPE text COLLATE "C",
    ALTER COLUMN wid TYPE text COLLATE "C";
ALTER TABLE werk_queues ALTER COLUMN name TYPE text COLLATE "C";
ALTER TABLE werk_workers ALTER COLUMN wid TYPE text COLLATE "C";
ALTER TABLE werk_counters ALTER COLUMN queue TYPE text COLLATE "C";
