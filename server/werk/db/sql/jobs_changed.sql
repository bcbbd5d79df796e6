-- What the vacuum policy weighs: the rows of the job table updated out of place or deleted since
-- statistics began (each leaves entries in the indexes for a whole pass to clear; an update in
-- place, HOT, leaves none), and the rows the table held at its last VACUUM. A counter, not
-- n_dead_tup: a pass that skips the indexes resets n_dead_tup without clearing them.
SELECT (s.n_tup_upd - s.n_tup_hot_upd + s.n_tup_del)::bigint AS changed,
       greatest(c.reltuples, 0)::float8 AS rows
FROM pg_stat_all_tables s
JOIN pg_class c ON c.oid = s.relid
WHERE s.relid = 'werk_jobs'::regclass
