-- With on_conflict replace, a waiting holder of the key takes the push's args and `at`
-- (job_push.sql's holder part); it kept its own expiry, which counted from the old `at`: moved
-- later, the job could only expire, never run. The holder now takes the push's expiry too. This
-- is werk.push_many of 0017_completed_jobs_table.sql with that one change.

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
            -- waiting holder takes this push's args and at, and its expiry with them.
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
                expires_at = CASE WHEN werk_replaces(excluded.unique_spec, h.state)
                                  THEN excluded.expires_at ELSE h.expires_at END,
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

-- As 0013_sql_interface.sql: the search path fixed to this schema, nothing for PUBLIC.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION werk.push_many(jsonb) SET search_path = %I, pg_temp',
                   current_schema());
    REVOKE ALL ON FUNCTION werk.push_many(jsonb) FROM PUBLIC;
END
$$;
