-- Werk schema v1. Append-only: later changes go in new numbered files.

CREATE TYPE werk_job_state AS ENUM (
    'scheduled', 'available', 'active', 'completed', 'dead', 'cancelled'
);

CREATE TYPE werk_worker_state AS ENUM ('running', 'quiet', 'terminate');

-- FIFO order within a priority: a new value each time a job becomes available, so a retried job
-- queues behind the work that arrived while it waited (as in Faktory and Sidekiq).
CREATE SEQUENCE werk_job_seq AS bigint CACHE 64;

CREATE TABLE werk_jobs (
    jid              text PRIMARY KEY CHECK (length(jid) BETWEEN 8 AND 100),
    jobtype          text NOT NULL CHECK (length(jobtype) BETWEEN 1 AND 200),
    queue            text NOT NULL CHECK (queue ~ '^[A-Za-z0-9._-]{1,100}$'),
    args             jsonb NOT NULL CHECK (jsonb_typeof(args) = 'array'),
    priority         integer NOT NULL DEFAULT 0 CHECK (priority BETWEEN -1000 AND 1000),
    reserve_for      integer NOT NULL DEFAULT 1800 CHECK (reserve_for BETWEEN 60 AND 86400),
    retry            integer NOT NULL DEFAULT 25 CHECK (retry BETWEEN -1 AND 1000),
    backtrace        integer NOT NULL DEFAULT 0 CHECK (backtrace BETWEEN 0 AND 1000),
    custom           jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(custom) = 'object'),
    at               timestamptz,
    state            werk_job_state NOT NULL,
    seq              bigint NOT NULL DEFAULT nextval('werk_job_seq'),
    run_at           timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    enqueued_at      timestamptz,
    attempt          integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    orphans          integer NOT NULL DEFAULT 0 CHECK (orphans >= 0),
    lease            uuid,
    lease_expires_at timestamptz,
    wid              text,
    progress         jsonb,
    retry_count      integer NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    failed_at        timestamptz,
    errtype          text CHECK (length(errtype) <= 200),
    message          text CHECK (length(message) <= 10000),
    error_backtrace  text[],
    finished_at      timestamptz,
    -- A lease exists exactly while the job is active.
    CONSTRAINT werk_jobs_lease_iff_active CHECK (
        (state = 'active') = (lease IS NOT NULL AND lease_expires_at IS NOT NULL)
    ),
    CONSTRAINT werk_jobs_available_enqueued CHECK (
        state NOT IN ('available', 'active') OR enqueued_at IS NOT NULL
    ),
    CONSTRAINT werk_jobs_finished_iff_terminal CHECK (
        (state IN ('completed', 'dead', 'cancelled')) = (finished_at IS NOT NULL)
    ),
    CONSTRAINT werk_jobs_failure_complete CHECK (
        (failed_at IS NULL) = (errtype IS NULL)
    )
) WITH (
    -- The queue table is a churn table: rows are inserted, updated a few times, and deleted.
    -- A lower fillfactor leaves room for HOT updates (claim, extend) and aggressive autovacuum
    -- keeps dead tuples from piling up between deletes.
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- Serves the claim query: per queue, highest priority first, then oldest.
CREATE INDEX werk_jobs_claim_idx ON werk_jobs (queue, priority DESC, seq)
    WHERE state = 'available';
-- Serves promotion of due scheduled/retrying jobs.
CREATE INDEX werk_jobs_scheduled_idx ON werk_jobs (run_at) WHERE state = 'scheduled';
-- Serves lease expiry and the release of a lost worker's leases.
CREATE INDEX werk_jobs_active_idx ON werk_jobs (lease_expires_at) WHERE state = 'active';
CREATE INDEX werk_jobs_active_wid_idx ON werk_jobs (wid) WHERE state = 'active';
-- Serves retention pruning of finished jobs.
CREATE INDEX werk_jobs_finished_idx ON werk_jobs (state, finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE werk_queues (
    name       text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9._-]{1,100}$'),
    paused     boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE werk_workers (
    wid           text PRIMARY KEY CHECK (length(wid) BETWEEN 1 AND 100),
    hostname      text NOT NULL DEFAULT '' CHECK (length(hostname) <= 255),
    pid           integer,
    labels        text[] NOT NULL DEFAULT '{}',
    rss_kb        bigint,
    reported_state text,
    state         werk_worker_state NOT NULL DEFAULT 'running',
    started_at    timestamptz NOT NULL,
    last_beat_at  timestamptz NOT NULL,
    gone_at       timestamptz
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05);

-- Counters survive job deletion. Rows are sharded so that concurrent acks do not queue on one
-- row lock; readers sum over shards.
CREATE TABLE werk_counters (
    day       date NOT NULL,
    queue     text NOT NULL,
    shard     smallint NOT NULL,
    pushed    bigint NOT NULL DEFAULT 0,
    processed bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (day, queue, shard)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.05);

-- Faktory/Sidekiq backoff: count^4 + 15 + rand(0..29) * (count + 1) seconds; count starts at 0.
CREATE FUNCTION werk_retry_delay(count integer) RETURNS interval
LANGUAGE sql VOLATILE AS $$
    SELECT make_interval(secs => power(least(count, 1000)::float8, 4) + 15
                                 + floor(random() * 30) * (count + 1))
$$;

-- What a failure does to a job. Shared by fail, lease expiry and lost workers so the policy is
-- written once:
--   'discard' retry = 0: the job is dropped (Faktory semantics);
--   'dead'    retry = -1, the worker asked for no retry, retries exhausted, or orphaned too often;
--   'retry'   otherwise: scheduled again after the backoff.
CREATE FUNCTION werk_failure_outcome(
    retry integer, retry_count integer, no_retry boolean, orphans integer, max_orphans integer
) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN retry = 0 THEN 'discard'
        WHEN retry = -1 OR no_retry OR retry_count > retry THEN 'dead'
        WHEN max_orphans > 0 AND orphans >= max_orphans THEN 'dead'
        ELSE 'retry'
    END
$$;
