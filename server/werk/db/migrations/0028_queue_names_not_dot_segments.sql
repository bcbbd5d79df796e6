-- A queue name is also a URL path segment (/v1/queues/{queue}/pause), where clients and
-- browsers resolve "." and ".." as dot segments: a queue so named could be filled but not paused,
-- cleared or viewed. The API refuses both names (domain/job.py's QUEUE_PATTERN); so does the
-- schema, wherever a queue name is written.
--
-- The checks are added NOT VALID: a database may already hold jobs in such a queue, and
-- validating would fail the migration on them. Those jobs are kept as they are; every queue name
-- written from now on is checked. A stored job moving between werk_jobs and werk_completed_jobs
-- keeps the werk_queue_name it has, which is not checked again, so such a job can still be
-- settled, retried or deleted by its jid. A werk_queues row is checked whenever it is written:
-- one under such a name stays as it is until deleted.
ALTER DOMAIN werk_queue_name
    ADD CONSTRAINT werk_queue_name_not_dot_segment CHECK (VALUE NOT IN ('.', '..')) NOT VALID;
ALTER TABLE werk_queues
    ADD CONSTRAINT werk_queues_name_not_dot_segment CHECK (name NOT IN ('.', '..')) NOT VALID;

-- The SQL interface refuses the two names itself, with its invalid_request error naming the field,
-- rather than leaving them to the domain's check at the insert. Otherwise as in
-- 0013_sql_interface.sql.
CREATE OR REPLACE FUNCTION werk._job(job jsonb, loc text) RETURNS werk._job
LANGUAGE plpgsql AS $$
DECLARE
    j werk._job;
    extra text;
    u jsonb;
    v jsonb;
    by_paths jsonb;
    subject jsonb;
    seconds_max CONSTANT float8 := 10 * 366 * 86400;
BEGIN
    IF jsonb_typeof(job) IS DISTINCT FROM 'object' THEN
        PERFORM werk._invalid(rtrim(loc, '.'), 'must be a JSON object');
    END IF;
    SELECT string_agg(k, ', ' ORDER BY k) INTO extra FROM jsonb_object_keys(job) AS k
    WHERE k NOT IN ('jid', 'jobtype', 'args', 'queue', 'priority', 'reserve_for', 'at', 'retry',
                    'backtrace', 'custom', 'keep_result_for', 'unique', 'expires_at',
                    'expires_in');
    IF extra IS NOT NULL THEN
        PERFORM werk._invalid(loc || extra, 'is not a job field');
    END IF;
    v := job -> 'jobtype';
    IF jsonb_typeof(v) IS DISTINCT FROM 'string' OR length(v #>> '{}') NOT BETWEEN 1 AND 200 THEN
        PERFORM werk._invalid(loc || 'jobtype', 'must be a string of 1 to 200 characters');
    END IF;
    j.jobtype := v #>> '{}';
    v := job -> 'jid';
    IF v IS NULL OR v = 'null' THEN
        -- As domain/jids.py: Unix time in milliseconds (11 hex digits) above 68 random bits.
        j.jid := lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 11, '0')
                 || substr(md5(gen_random_uuid()::text), 1, 17);
    ELSIF jsonb_typeof(v) <> 'string' OR length(v #>> '{}') NOT BETWEEN 8 AND 100
          OR (v #>> '{}') !~ '^[A-Za-z0-9][A-Za-z0-9._~:@+=-]*$' THEN
        PERFORM werk._invalid(loc || 'jid', 'must be 8 to 100 characters matching '
                                            '^[A-Za-z0-9][A-Za-z0-9._~:@+=-]*$');
    ELSE
        j.jid := v #>> '{}';
    END IF;
    j.args := werk._json_field(job, 'args', '[]', loc);
    v := job -> 'queue';
    IF v IS NULL OR v = 'null' THEN
        j.queue := 'default';
    ELSIF jsonb_typeof(v) <> 'string' OR (v #>> '{}') !~ '^[A-Za-z0-9._-]{1,100}$'
          OR (v #>> '{}') IN ('.', '..') THEN
        PERFORM werk._invalid(loc || 'queue', 'must match ^[A-Za-z0-9._-]{1,100}$ and not be . '
                                              'or ..');
    ELSE
        j.queue := v #>> '{}';
    END IF;
    j.priority := werk._int(job, 'priority', -1000, 1000, 0, loc);
    j.reserve_for := werk._int(job, 'reserve_for', 60, 86400, 1800, loc);
    j.retry := werk._int(job, 'retry', -1, 1000, 25, loc);
    j.backtrace := werk._int(job, 'backtrace', 0, 1000, 0, loc);
    j.keep_result_for := nullif(werk._int(job, 'keep_result_for', 0, 31536000, 0, loc), 0);
    j.custom := werk._json_field(job, 'custom', '{}', loc);
    j.at := werk._time(job -> 'at', loc || 'at');
    j.expires_at := werk._time(job -> 'expires_at', loc || 'expires_at');
    j.expires_in := werk._seconds(job -> 'expires_in', seconds_max, false, loc || 'expires_in');
    IF j.expires_at IS NOT NULL AND j.expires_in IS NOT NULL THEN
        PERFORM werk._invalid(loc || 'expires_in', 'not with expires_at');
    END IF;
    -- The unique lock as domain/unique.py makes it.
    u := job -> 'unique';
    IF u IS NULL OR u = 'null' THEN
        RETURN j;
    END IF;
    IF jsonb_typeof(u) <> 'object' THEN
        PERFORM werk._invalid(loc || 'unique', 'must be a JSON object');
    END IF;
    u := jsonb_strip_nulls(u);
    SELECT string_agg(k, ', ' ORDER BY k) INTO extra FROM jsonb_object_keys(u) AS k
    WHERE k NOT IN ('for', 'until', 'key', 'by', 'on_conflict');
    IF extra IS NOT NULL THEN
        PERFORM werk._invalid(loc || 'unique.' || extra, 'is not a unique field');
    END IF;
    IF u ? 'key' AND u ? 'by' THEN
        PERFORM werk._invalid(loc || 'unique', 'give either key or by, not both');
    END IF;
    IF coalesce(u ->> 'until', 'success') NOT IN ('success', 'start')
       OR jsonb_typeof(coalesce(u -> 'until', '""')) <> 'string' THEN
        PERFORM werk._invalid(loc || 'unique.until', 'must be success or start');
    END IF;
    IF coalesce(u ->> 'on_conflict', 'reject') NOT IN ('reject', 'existing', 'replace')
       OR jsonb_typeof(coalesce(u -> 'on_conflict', '""')) <> 'string' THEN
        PERFORM werk._invalid(loc || 'unique.on_conflict', 'must be reject, existing or replace');
    END IF;
    j.unique_for := werk._seconds(u -> 'for', seconds_max, false, loc || 'unique.for');
    by_paths := u -> 'by';
    IF u ? 'key' THEN
        v := u -> 'key';
        IF jsonb_typeof(v) <> 'string' OR length(v #>> '{}') NOT BETWEEN 1 AND 200 THEN
            PERFORM werk._invalid(loc || 'unique.key', 'must be a string of 1 to 200 characters');
        END IF;
        j.unique_key := v #>> '{}';
    ELSE
        IF by_paths IS NOT NULL THEN
            IF jsonb_typeof(by_paths) <> 'array'
               OR jsonb_array_length(by_paths) NOT BETWEEN 1 AND 20
               OR EXISTS (SELECT 1 FROM jsonb_array_elements(by_paths) AS p
                          WHERE jsonb_typeof(p) <> 'string' OR length(p #>> '{}') > 200
                             OR (p #>> '{}') !~ '^(args|custom)(\.[^.]+)*$') THEN
                PERFORM werk._invalid(loc || 'unique.by', 'must be 1 to 20 paths like args.0 or '
                                                          'custom.tenant');
            END IF;
            -- Each path's value, or null where it leads nowhere (unique.value_at).
            SELECT jsonb_object_agg(p #>> '{}', coalesce(
                       CASE WHEN split_part(p #>> '{}', '.', 1) = 'args' THEN j.args
                            ELSE j.custom END
                       #> coalesce((string_to_array(p #>> '{}', '.'))[2:], '{}'),
                       'null'))
            INTO subject FROM jsonb_array_elements(by_paths) AS p;
        ELSE
            subject := j.args;
        END IF;
        j.unique_key := 'sha256:' || encode(sha256(convert_to(
            werk._canonical(jsonb_build_array(j.jobtype, j.queue, subject)), 'UTF8')), 'hex');
    END IF;
    j.unique_spec := jsonb_build_object(
        'key', j.unique_key,
        'until', coalesce(u ->> 'until', 'success'),
        'on_conflict', coalesce(u ->> 'on_conflict', 'reject'));
    IF j.unique_for IS NOT NULL THEN
        -- Written as a double, as the server writes it (3600.0).
        j.unique_spec := j.unique_spec || jsonb_build_object('for', CASE
            WHEN j.unique_for = trunc(j.unique_for)
            THEN (trunc(j.unique_for)::bigint::text || '.0')::jsonb
            ELSE to_jsonb(j.unique_for) END);
    END IF;
    IF by_paths IS NOT NULL THEN
        j.unique_spec := j.unique_spec || jsonb_build_object('by', by_paths);
    END IF;
    RETURN j;
END
$$;

-- As 0013_sql_interface.sql: the search path fixed to this schema, nothing for PUBLIC.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION werk._job(jsonb, text) SET search_path = %I, pg_temp',
                   current_schema());
    REVOKE ALL ON FUNCTION werk._job(jsonb, text) FROM PUBLIC;
END
$$;
