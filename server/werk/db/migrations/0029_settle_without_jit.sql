-- PostgreSQL compiles a statement whose estimated cost passes jit_above_cost (JIT, on by default
-- wherever its LLVM support is installed), at every execution. The settling's walks are estimated
-- from werk_job_deps' statistics, which with a large table of edges pass that cost by far: each
-- settled job's commit then compiled the settling's statements (0.9 s per settled job with a
-- million edges), to read a few rows by key. The server's own connections run without JIT, but
-- not those it cannot set: behind a transaction pooler, and the SQL interface (werk.ack,
-- werk.fail) on the application's own connections. So the two functions turn it off for
-- themselves. CREATE OR REPLACE of either drops this setting unless the new definition states it
-- again, as it states enable_seqscan (0024_settle_by_edge_lookups.sql).
ALTER FUNCTION werk_settlings_settle() SET jit = off;
ALTER FUNCTION werk_dependencies_settle(text, text, jsonb, timestamptz) SET jit = off;
