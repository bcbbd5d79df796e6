-- Settling a job walks its dependents one edge lookup at a time: the dependents of the job
-- settled, then, down from one that ended badly, the dependents of each job its policy
-- finishes, and the edges of each are marked settled. Each lookup names one dependency, which
-- the primary key of werk_job_deps finds; but the planner prices a lookup by the average
-- fan-out its statistics see, and where dependencies have hundreds of dependents it chose to
-- hash-join each step of the walk against the whole table instead: every edge kept (dead
-- dependents keep theirs for months) read once per settled job, and once per level of a chain
-- finished by a failure (minutes for a chain of thousands over a large table, inside the
-- commit of the ack or failure). A whole-table read is never the better way for these walks,
-- so the two functions that make them tell the planner so; a statement with no index to use
-- still reads the table. CREATE OR REPLACE of either function drops this setting unless the
-- new definition states it again.
ALTER FUNCTION werk_settlings_settle() SET enable_seqscan = off;
ALTER FUNCTION werk_dependencies_settle(text, text, jsonb, timestamptz) SET enable_seqscan = off;
