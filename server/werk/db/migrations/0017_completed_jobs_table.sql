-- Completed jobs that are kept (pushed with keep_result_for, kept by WERK_COMPLETED_RETENTION, or
-- kept for the jobs and batch that depend on them) live in a table of their own, out of the
-- pages and indexes of werk_jobs.
--
-- werk_jobs is a churn table with room left on every page (fillfactor 70): kept rows among its
-- live ones gave every new job a page of its own beside them, each write dirtied a page of kept
-- rows, and each vacuum pass read them again. A kept job is written once, at its ack, and read
-- or pruned later: here it is never touched by the claim, the ack of other jobs or their vacuum.
--
-- werk_completed_jobs has the columns of werk_jobs, in the same order, so that the rows of both
-- read alike (werk_stored_jobs below); a column added to werk_jobs later is added here too, and
-- the view made again. Every statement that completes a kept job moves it here in one statement
-- (its DELETE from werk_jobs feeding the INSERT here); werk_jobs keeps no completed job.
--
-- A jid stays taken while its completed job is kept, as when the job stayed in werk_jobs: a push
-- of that jid stores nothing and answers with the completed job. Each push statement leaves out
-- the jids kept here (werk_jids_kept) and checks again after its insert (werk_jids_free): the
-- insert of a jid whose job is being acked waits on werk_jobs's primary key until that ack
-- commits, and a check made then, in a fresh snapshot, sees the job the ack moved here.
CREATE TABLE werk_completed_jobs (LIKE werk_jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE werk_completed_jobs
    ADD PRIMARY KEY (jid),
    ADD CONSTRAINT werk_completed_jobs_completed CHECK (state = 'completed'),
    ADD CONSTRAINT werk_completed_jobs_kept_until CHECK (keep_until IS NOT NULL);

WITH moved AS (
    DELETE FROM werk_jobs WHERE state = 'completed' RETURNING *
)
INSERT INTO werk_completed_jobs SELECT * FROM moved;

ALTER TABLE werk_jobs ADD CONSTRAINT werk_jobs_never_completed CHECK (state <> 'completed');
DROP INDEX werk_jobs_completed_idx;

-- Pruning, in keep_until order (job_prune.sql).
CREATE INDEX werk_completed_jobs_keep_idx ON werk_completed_jobs (keep_until);
-- Operators' pages and counts, per queue, as werk_jobs_queue_state_idx serves the other states.
CREATE INDEX werk_completed_jobs_queue_idx ON werk_completed_jobs (queue, state, created_at, jid);
-- Search by words, as werk_jobs_words_idx.
CREATE INDEX werk_completed_jobs_words_idx ON werk_completed_jobs
    USING gin (werk_job_words(errtype, message, args, custom));
-- A batch's members.
CREATE INDEX werk_completed_jobs_batch_idx ON werk_completed_jobs (batch)
    WHERE batch IS NOT NULL;

-- Every job stored, in any state: what readers of jobs by jid, state or batch read.
CREATE VIEW werk_stored_jobs AS
SELECT * FROM werk_jobs
UNION ALL
SELECT * FROM werk_completed_jobs;

-- The operators' filter (0011_job_search.sql) over the columns it reads, so that it applies to
-- the rows of either table and of the view alike.
DROP FUNCTION werk_job_filter(werk_jobs, text, text, tsquery, boolean);
CREATE FUNCTION werk_job_filter(
    jobtype text, errtype text, message text, args jsonb, custom jsonb, failed_at timestamptz,
    of_jobtype text, q text, search tsquery, has_failed boolean
) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (of_jobtype IS NULL OR jobtype = of_jobtype)
       AND (q IS NULL
            OR coalesce(werk_job_words(errtype, message, args, custom) @@ search, false))
       AND (has_failed IS NULL OR (failed_at IS NOT NULL) = has_failed)
$$;

-- Which of jids are kept completed, seen in a fresh snapshot (the function is volatile): a push
-- calls it once its insert is done, and fails with a unique violation on werk_jobs_pkey, as
-- for a jid in werk_jobs, when one is; the pusher then writes it again, leaving it out.
CREATE FUNCTION werk_jids_free(jids text[]) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    taken text;
BEGIN
    SELECT k.jid INTO taken FROM werk_completed_jobs k WHERE k.jid = ANY (jids) LIMIT 1;
    IF taken IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'unique_violation', CONSTRAINT = 'werk_jobs_pkey',
            TABLE = 'werk_jobs', MESSAGE = format('job %s is kept completed', taken);
    END IF;
    RETURN true;
END
$$;

-- Move the job held (werk_jobs row, as it was before the ack) into werk_completed_jobs: the
-- SQL interface's ack (0013_sql_interface.sql), otherwise unchanged.
CREATE OR REPLACE FUNCTION werk_attempt.ack(jid text, lease text, result jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    lease_id uuid;
    queue_ text;
    now_ timestamptz := statement_timestamp();
BEGIN
    IF lease !~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$' THEN
        RETURN false;  -- no lease the server hands out
    END IF;
    lease_id := lease::uuid;
    PERFORM werk._check_json(result, 'result');
    DELETE FROM werk_jobs j
    WHERE j.jid = ack.jid AND j.lease = lease_id AND j.keep_result_for IS NULL
      AND j.dependents IS NULL  -- kept for the jobs that depend on it (0012_dependencies.sql)
    RETURNING j.queue INTO queue_;
    IF queue_ IS NULL THEN
        WITH moved AS (
            DELETE FROM werk_jobs j
            WHERE j.jid = ack.jid AND j.lease = lease_id
            RETURNING j.*
        )
        INSERT INTO werk_completed_jobs
        SELECT m.jid, m.jobtype, m.queue, m.args, m.priority, m.reserve_for, m.retry,
               m.backtrace, m.custom, m.at, 'completed', m.seq, m.run_at, m.created_at,
               m.enqueued_at, m.attempt, m.orphans, NULL, NULL, m.wid, m.progress,
               m.retry_count, m.failed_at, m.errtype, m.message, m.error_backtrace, now_,
               m.keep_result_for, ack.result,
               now_ + make_interval(secs => coalesce(m.keep_result_for, 0)),
               m.expires_at, m.unique_key, m.unique_until, m.unique_spec, m.waiting_for,
               m.dependents, m.dependencies, m.batch
        FROM moved m
        RETURNING queue INTO queue_;
    END IF;
    IF queue_ IS NULL THEN
        RETURN false;
    END IF;
    INSERT INTO werk_counters AS k (day, queue, shard, processed)
    VALUES ((now_ AT TIME ZONE 'UTC')::date, queue_, floor(random() * 16)::smallint, 1)
    ON CONFLICT (day, queue, shard) DO UPDATE SET processed = k.processed + 1;
    -- Whoever waits for the job's result is woken at commit.
    PERFORM pg_notify('werk_jobs', 'sql|#' || ack.jid);
    RETURN true;
END
$$;

-- Note held as it stands now, in either table (0016_note_settlings.sql).
CREATE OR REPLACE FUNCTION werk._note(held werk_jobs) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO werk_job_changes (jid, before, after, dependents, dependencies, batch, result,
                                  finished_at)
    SELECT held.jid, held.state, j.state, held.dependents, held.dependencies, held.batch,
           j.result, j.finished_at
    FROM (SELECT) o LEFT JOIN werk_stored_jobs j ON j.jid = held.jid
    WHERE held.dependents OR held.dependencies
$$;

-- A push through the SQL interface leaves a kept jid alone as job_push.sql does: it answers the
-- jid, stores nothing and counts nothing (0013_sql_interface.sql, otherwise unchanged).
CREATE OR REPLACE FUNCTION werk.push_many(jobs jsonb) RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    now_ timestamptz := statement_timestamp();
    j werk._job;
    specs werk._job[] := '{}';
    i integer;
    n integer;
    answer text;
    holder record;
    due boolean;
    mode text;
    arrived jsonb := '{}';
    payload text;
BEGIN
    IF jsonb_typeof(jobs) IS DISTINCT FROM 'array' OR jsonb_array_length(jobs) = 0 THEN
        PERFORM werk._invalid('jobs', 'must be a non-empty JSON array of jobs');
    END IF;
    -- Every job is validated before any is stored, and a jid or a unique key twice is the
    -- caller's error, as in HTTP's batch push.
    n := jsonb_array_length(jobs);
    FOR i IN 0 .. n - 1 LOOP
        j := werk._job(jobs -> i, CASE WHEN n = 1 THEN '' ELSE format('jobs.%s.', i) END);
        IF j.jid = ANY (SELECT s.jid FROM unnest(specs) s) THEN
            PERFORM werk._invalid(format('jobs.%s.jid', i), 'duplicate jid in batch');
        END IF;
        IF j.unique_key = ANY (SELECT s.unique_key FROM unnest(specs) s) THEN
            PERFORM werk._invalid(format('jobs.%s.unique', i), 'duplicate unique key in batch');
        END IF;
        specs := specs || j;
    END LOOP;
    FOREACH j IN ARRAY specs LOOP
        due := j.at IS NULL OR j.at <= now_;
        IF EXISTS (SELECT 1 FROM werk_stored_jobs e WHERE e.jid = j.jid) THEN
            RETURN NEXT j.jid;  -- a retried push: the stored job is left alone
            CONTINUE;
        END IF;
        mode := j.unique_spec ->> 'on_conflict';
        LOOP
            IF j.unique_key IS NOT NULL THEN
                -- Keys this push may take from their holders (job_push.sql's release part).
                UPDATE werk_jobs h SET unique_key = NULL
                WHERE h.unique_key = j.unique_key
                  AND h.state IN ('scheduled', 'available', 'active')
                  AND (h.unique_until <= now_ OR (h.state = 'active' AND mode = 'replace'));
            END IF;
            INSERT INTO werk_jobs AS h (jid, jobtype, queue, args, priority, reserve_for, retry,
                                        backtrace, custom, at, state, run_at, created_at,
                                        enqueued_at, expires_at, keep_result_for, unique_key,
                                        unique_until, unique_spec)
            VALUES (j.jid, j.jobtype, j.queue, j.args, j.priority, j.reserve_for, j.retry,
                    j.backtrace, j.custom, j.at,
                    CASE WHEN due THEN 'available' ELSE 'scheduled' END::werk_job_state,
                    greatest(coalesce(j.at, now_), now_), now_, CASE WHEN due THEN now_ END,
                    werk._expires_at(j, now_), j.keep_result_for, j.unique_key,
                    werk._unique_until(j, now_), j.unique_spec)
            -- The holder of the key (job_push.sql's holder part): with on_conflict replace, a
            -- waiting holder takes this push's args and at.
            ON CONFLICT (unique_key)
                WHERE unique_key IS NOT NULL AND state IN ('scheduled', 'available', 'active')
            DO UPDATE SET
                args = CASE WHEN werk_replaces(excluded.unique_spec, h.state)
                            THEN excluded.args ELSE h.args END,
                at = CASE WHEN werk_replaces(excluded.unique_spec, h.state)
                          THEN excluded.at ELSE h.at END,
                state = CASE WHEN werk_replaces(excluded.unique_spec, h.state)
                             THEN excluded.state ELSE h.state END,
                run_at = CASE WHEN werk_replaces(excluded.unique_spec, h.state)
                              THEN excluded.run_at ELSE h.run_at END,
                enqueued_at = CASE WHEN werk_replaces(excluded.unique_spec, h.state)
                                        AND NOT (h.state = 'available'
                                                 AND excluded.state = 'available')
                                   THEN excluded.enqueued_at ELSE h.enqueued_at END,
                seq = CASE WHEN werk_replaces(excluded.unique_spec, h.state)
                                AND NOT (h.state = 'available'
                                         AND excluded.state = 'available')
                           THEN excluded.seq ELSE h.seq END,
                unique_until = CASE WHEN werk_replaces(excluded.unique_spec, h.state)
                                    THEN excluded.unique_until ELSE h.unique_until END,
                unique_spec = CASE WHEN werk_replaces(excluded.unique_spec, h.state)
                                   THEN excluded.unique_spec ELSE h.unique_spec END
            RETURNING h.jid, h.state, h.queue INTO holder;
            -- A replace meets an active holder only if it became active after the release
            -- above, which gives its key up on the next attempt.
            EXIT WHEN holder.jid = j.jid OR mode <> 'replace' OR holder.state <> 'active';
        END LOOP;
        IF holder.jid = j.jid THEN
            PERFORM werk_jids_free(ARRAY[j.jid]);
            INSERT INTO werk_counters AS k (day, queue, shard, pushed)
            VALUES ((now_ AT TIME ZONE 'UTC')::date, j.queue, floor(random() * 16)::smallint, 1)
            ON CONFLICT (day, queue, shard) DO UPDATE SET pushed = k.pushed + 1;
        ELSIF mode = 'reject' THEN
            RAISE EXCEPTION USING ERRCODE = 'unique_violation',
                MESSAGE = format('not_unique: job %s holds the unique key %s', holder.jid,
                                 j.unique_key),
                DETAIL = holder.jid;
        END IF;
        IF holder.state = 'available' THEN
            arrived := jsonb_set(arrived, ARRAY[holder.queue],
                                 to_jsonb(coalesce((arrived ->> holder.queue)::int, 0) + 1));
        END IF;
        RETURN NEXT holder.jid;
    END LOOP;
    -- Wake long polls on every node, at commit (a rollback sends nothing): the payload of
    -- notify.sql, "<sender>|queue:count,...", in pieces that fit a notification. The sender is
    -- new each time: PostgreSQL delivers equal notifications of one transaction once, and two
    -- pushes of one job each must wake two fetches.
    payload := '';
    FOR answer IN SELECT key || ':' || value FROM jsonb_each_text(arrived) LOOP
        IF length(payload) + length(answer) > 7000 THEN
            PERFORM pg_notify('werk_jobs', 'sql-' || gen_random_uuid() || '|' || payload);
            payload := '';
        END IF;
        payload := payload || CASE WHEN payload = '' THEN '' ELSE ',' END || answer;
    END LOOP;
    IF payload <> '' THEN
        PERFORM pg_notify('werk_jobs', 'sql-' || gen_random_uuid() || '|' || payload);
    END IF;
END
$$;

-- As 0013_sql_interface.sql: the functions replaced above run with the search path fixed to
-- this schema, and nothing for PUBLIC (the grants to werk_app are unchanged).
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOREACH f IN ARRAY ARRAY['werk.push_many(jsonb)', 'werk._note(werk_jobs)',
                             'werk_attempt.ack(text, text, jsonb)']::regprocedure[] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$$;
