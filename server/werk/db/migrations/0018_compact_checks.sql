-- Before a statement writes its first row to a table, PostgreSQL reads each of the table's CHECK
-- constraints back from its stored text and plans it again: work done once per statement, for
-- every push, claim, fail and extend, that grows with the number and size of the checks and not
-- with the rows written. A domain's checks are read once per connection. So the checks on a
-- single column move into domains, as 0007_checks_where_written.sql did; the two checks on
-- waiting jobs become one, which names the state 0012_dependencies.sql could not name yet (a
-- job counting dependencies is waiting; 0012 also let a skipped job without finished_at count
-- them, which no statement writes); and each list of states is written as one array constant,
-- stored as one value instead of an array expression that every statement would fold again.
--
-- As in 0007, the domains are created without their checks, so that retyping the columns is a
-- relabelling (the tables are not rewritten), then given their checks, each read once over the
-- stored rows. werk_jobs_unique_idx, over a retyped column, is rebuilt. werk_stored_jobs reads
-- the retyped columns, so it is made again over them.
CREATE DOMAIN werk_unique_key AS text;
CREATE DOMAIN werk_unique_spec AS jsonb;
CREATE DOMAIN werk_waiting_for AS integer;

-- werk_completed_jobs has the columns and the checks of werk_jobs (0017_completed_jobs_table.sql):
-- both change alike.
DROP VIEW werk_stored_jobs;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['werk_jobs', 'werk_completed_jobs'] LOOP
        EXECUTE format($sql$
            ALTER TABLE %I
                ALTER COLUMN unique_key TYPE werk_unique_key COLLATE "C",
                ALTER COLUMN unique_spec TYPE werk_unique_spec,
                ALTER COLUMN waiting_for TYPE werk_waiting_for,
                DROP CONSTRAINT werk_jobs_unique_key_check,
                DROP CONSTRAINT werk_jobs_unique_spec_check,
                DROP CONSTRAINT werk_jobs_waiting_for_check,
                DROP CONSTRAINT werk_jobs_waiting_for_only_waiting,
                DROP CONSTRAINT werk_jobs_waiting_has_dependencies,
                DROP CONSTRAINT werk_jobs_available_enqueued,
                DROP CONSTRAINT werk_jobs_finished_iff_terminal,
                ADD CONSTRAINT werk_jobs_available_enqueued CHECK (
                    state <> ALL ('{available,active}'::werk_job_state[])
                    OR enqueued_at IS NOT NULL),
                ADD CONSTRAINT werk_jobs_finished_iff_terminal CHECK (
                    (state <> ALL ('{scheduled,available,active}'::werk_job_state[])
                     AND waiting_for IS NULL) = (finished_at IS NOT NULL)),
                ADD CONSTRAINT werk_jobs_waiting_on_dependencies CHECK (
                    waiting_for IS NULL OR (state = 'waiting' AND dependencies))
        $sql$, t);
    END LOOP;
END
$$;
CREATE VIEW werk_stored_jobs AS
SELECT * FROM werk_jobs
UNION ALL
SELECT * FROM werk_completed_jobs;

ALTER DOMAIN werk_unique_key ADD CHECK (length(VALUE) BETWEEN 1 AND 200);
ALTER DOMAIN werk_unique_spec ADD CHECK (jsonb_typeof(VALUE) = 'object');
ALTER DOMAIN werk_waiting_for ADD CHECK (VALUE > 0);
