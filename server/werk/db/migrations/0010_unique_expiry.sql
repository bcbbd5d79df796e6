-- Unique jobs and expiring jobs.
--
-- A unique job holds its key in unique_key while it is scheduled, available or active; the
-- unique index admits one holder per key, so two pushes of the same unique job, on any nodes,
-- store one. A job leaves the index when it settles (acked, dead, expired, cancelled: the
-- predicate no longer admits it), or when a statement clears its unique_key: a worker taking
-- a job locked until start, a push finding its time bound (unique_until) passed, or a push
-- replacing an active holder. unique_spec keeps what the producer asked, to show with the job.
--
-- An expiring job is never handed out at or after expires_at; the upkeep pass moves it to the
-- new state expired, a finished state kept and pruned like dead.
ALTER TYPE werk_job_state ADD VALUE 'expired';

ALTER TABLE werk_jobs
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN unique_key text COLLATE "C" CHECK (length(unique_key) BETWEEN 1 AND 200),
    ADD COLUMN unique_until timestamptz,
    ADD COLUMN unique_spec jsonb CHECK (jsonb_typeof(unique_spec) = 'object');

-- The new state is unusable in this transaction (PostgreSQL's rule for a value added to an
-- enum), so the finished states are named by what they are not.
ALTER TABLE werk_jobs DROP CONSTRAINT werk_jobs_finished_iff_terminal,
    ADD CONSTRAINT werk_jobs_finished_iff_terminal CHECK (
        (state NOT IN ('scheduled', 'available', 'active')) = (finished_at IS NOT NULL)
    );

CREATE UNIQUE INDEX werk_jobs_unique_idx ON werk_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('scheduled', 'available', 'active');
-- Serves the expiry pass: only jobs that may expire, while they wait.
CREATE INDEX werk_jobs_expires_idx ON werk_jobs (expires_at)
    WHERE expires_at IS NOT NULL AND state IN ('scheduled', 'available');

ALTER TABLE werk_counters ADD COLUMN expired bigint NOT NULL DEFAULT 0;

-- Whether a push with on_conflict replace (its unique_spec) takes over the holder of its key:
-- only a holder still waiting, never one a worker runs.
CREATE FUNCTION werk_replaces(spec jsonb, holder werk_job_state) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(spec ->> 'on_conflict' = 'replace', false) AND holder <> 'active'
$$;
