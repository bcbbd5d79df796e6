-- The SQL interface: push, ack and fail jobs inside the application's own transaction, from an
-- application that shares Werk's database. Its contract (these signatures, the werk_app role's
-- privileges, the error codes) is versioned with the migrations: a later change to it is a new
-- migration, and tests/integration/sql_interface/test_contract.py pins it.
--
-- A job pushed here is stored as HTTP's push stores it (the same defaults, limits and unique
-- keys; the schema's CHECKs hold either way), is invisible until the caller commits and vanishes
-- with a rollback; the notification that wakes long polls on every node is delivered at commit.
-- Bad input raises SQLSTATE 22023 (invalid_parameter_value) with a message that begins with
-- "invalid_request:" and names the field; a unique key another job holds (on_conflict reject)
-- raises 23505 (unique_violation), "not_unique:" and the holder's jid. Either way the caller's
-- transaction is aborted, so nothing it did is stored.
--
-- The functions run as their owner (SECURITY DEFINER) with the search path fixed to the schema
-- Werk's tables live in (set below), so a caller needs only the werk_app role: EXECUTE on these
-- four functions, nothing on any table.

CREATE SCHEMA werk;
REVOKE ALL ON SCHEMA werk FROM PUBLIC;

-- An invalid_request error (SQLSTATE 22023) naming the field at fault.
CREATE FUNCTION werk._invalid(loc text, problem text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
        MESSAGE = format('invalid_request: %s %s', loc, problem),
        DETAIL = loc;
END
$$;

-- The rule of domain/json_values.py: integers within 64 bits, nesting at most 64 levels (jsonb
-- itself refuses NUL, lone surrogates, NaN and Infinity).
CREATE FUNCTION werk._check_json(value jsonb, loc text) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    IF jsonb_path_exists(value, 'strict $.**?(@.type() == "number"
            && (@ >= 9223372036854775808 || @ < -9223372036854775808))') THEN
        PERFORM werk._invalid(loc, 'integers must fit in 64 bits');
    END IF;
    IF jsonb_path_exists(value, 'strict $.**{64}') THEN
        PERFORM werk._invalid(loc, 'nested deeper than 64 levels');
    END IF;
    RETURN value;
END
$$;

-- An integer field of a job: a JSON number without fraction (31.0 counts), within bounds.
CREATE FUNCTION werk._int(job jsonb, field text, lo bigint, hi bigint, fallback integer,
                          loc text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v jsonb := job -> field;
BEGIN
    IF v IS NULL OR v = 'null' THEN
        RETURN fallback;
    END IF;
    IF (CASE WHEN jsonb_typeof(v) <> 'number' THEN true
             ELSE v::text::numeric <> trunc(v::text::numeric)
                  OR v::text::numeric NOT BETWEEN lo AND hi END) THEN
        PERFORM werk._invalid(loc || field,
                              format('must be an integer between %s and %s', lo, hi));
    END IF;
    RETURN v::text::numeric::integer;
END
$$;

-- args or custom: absent or null is `fallback`, else JSON of the fallback's type.
CREATE FUNCTION werk._json_field(job jsonb, field text, fallback jsonb, loc text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v jsonb := job -> field;
BEGIN
    IF v IS NULL OR v = 'null' THEN
        RETURN fallback;
    END IF;
    IF jsonb_typeof(v) <> jsonb_typeof(fallback) THEN
        PERFORM werk._invalid(loc || field, 'must be a JSON ' || jsonb_typeof(fallback));
    END IF;
    RETURN werk._check_json(v, loc || field);
END
$$;

-- A number of seconds: > 0 (or >= 0 with zero_ok), at most hi.
CREATE FUNCTION werk._seconds(v jsonb, hi float8, zero_ok boolean, loc text) RETURNS float8
LANGUAGE plpgsql AS $$
BEGIN
    IF v IS NULL OR v = 'null' THEN
        RETURN NULL;
    END IF;
    IF (CASE WHEN jsonb_typeof(v) <> 'number' THEN true
             ELSE v::text::numeric > hi OR v::text::numeric < 0
                  OR (v::text::numeric = 0 AND NOT zero_ok) END) THEN
        PERFORM werk._invalid(loc, format('must be a number of seconds, %s 0 and at most %s',
                                          CASE WHEN zero_ok THEN 'at least' ELSE 'more than' END,
                                          hi));
    END IF;
    RETURN v::text::float8;
END
$$;

-- A time: an RFC 3339 string with a time zone, between 0001-01-01 and 9999-12-31 in UTC
-- (domain/times.py).
CREATE FUNCTION werk._time(v jsonb, loc text) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz;
BEGIN
    IF v IS NULL OR v = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(v) <> 'string' OR (v #>> '{}') !~
        '^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$' THEN
        PERFORM werk._invalid(loc, 'must be an RFC 3339 time with a zone, e.g. '
                                   '2030-01-02T03:04:05Z');
    END IF;
    BEGIN
        t := (v #>> '{}')::timestamptz;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        PERFORM werk._invalid(loc, 'is not a valid time');
    END;
    IF t NOT BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00' THEN
        PERFORM werk._invalid(loc, 'must lie between 0001-01-01T00:00:00Z and '
                                   '9999-12-31T23:59:59.999999Z (in UTC)');
    END IF;
    RETURN t;
END
$$;

-- JSON in the canonical form of domain/unique.py (orjson, keys sorted, integral numbers as
-- integers), so a hashed unique key is the one HTTP's push computes for the same job. Numbers
-- with a fraction are written as PostgreSQL writes a double; past 1e15 or below 1e-4 that
-- notation may differ from orjson's (name the key with unique.key to be sure).
CREATE FUNCTION werk._canonical(v jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    n numeric;
BEGIN
    CASE jsonb_typeof(v)
    WHEN 'object' THEN
        RETURN '{' || coalesce((SELECT string_agg(to_json(k)::text || ':' || werk._canonical(e),
                                                  ',' ORDER BY k COLLATE "C")
                                FROM jsonb_each(v) AS x(k, e)), '') || '}';
    WHEN 'array' THEN
        RETURN '[' || coalesce((SELECT string_agg(werk._canonical(e), ',' ORDER BY i)
                                FROM jsonb_array_elements(v) WITH ORDINALITY AS x(e, i)), '')
               || ']';
    WHEN 'number' THEN
        n := v::text::numeric;
        IF n = trunc(n) THEN
            RETURN trunc(n)::text;
        END IF;
        RETURN regexp_replace(n::float8::text, 'e\+?(-?)0*(\d)', 'e\1\2');
    ELSE
        RETURN v::text;
    END CASE;
END
$$;

-- One job of a push, as HTTP's JobPush takes it (domain/bodies.py), validated and with its
-- defaults; stored (or met as an existing jid or a unique key's holder) by werk.push_many.
CREATE TYPE werk._job AS (
    jid text, jobtype text, queue text, args jsonb, priority integer, reserve_for integer,
    retry integer, backtrace integer, custom jsonb, at timestamptz, keep_result_for integer,
    expires_at timestamptz, expires_in float8, unique_key text, unique_for float8,
    unique_spec jsonb
);

CREATE FUNCTION werk._job(job jsonb, loc text) RETURNS werk._job
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
    ELSIF jsonb_typeof(v) <> 'string' OR (v #>> '{}') !~ '^[A-Za-z0-9._-]{1,100}$' THEN
        PERFORM werk._invalid(loc || 'queue', 'must match ^[A-Za-z0-9._-]{1,100}$');
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

-- Time bounds count from `at`, or from now for a job due already; capped at the last time Werk
-- stores (job_push.sql's input part).
CREATE FUNCTION werk._expires_at(j werk._job, now_ timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(j.expires_at, CASE WHEN j.expires_in IS NOT NULL
        THEN least(greatest(coalesce(j.at, now_), now_) + make_interval(secs => j.expires_in),
                   '9999-12-31 23:59:59.999999+00'::timestamptz) END)
$$;

CREATE FUNCTION werk._unique_until(j werk._job, now_ timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN j.unique_for IS NOT NULL
        THEN least(greatest(coalesce(j.at, now_), now_) + make_interval(secs => j.unique_for),
                   '9999-12-31 23:59:59.999999+00'::timestamptz) END
$$;

-- Push jobs (each an object with HTTP push's fields: jobtype, args, queue, jid, at, priority,
-- retry, reserve_for, backtrace, custom, keep_result_for, unique, expires_at or expires_in) in
-- the caller's transaction. Returns per job, in order, its jid: the stored job's for a jid that
-- exists already (nothing is stored again), the holder's for a unique key another job holds
-- with on_conflict existing or replace.
CREATE FUNCTION werk.push_many(jobs jsonb) RETURNS SETOF text
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
        IF EXISTS (SELECT 1 FROM werk_jobs e WHERE e.jid = j.jid) THEN
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

-- Push one job; returns its jid (see werk.push_many). opts holds every push field but jobtype
-- and args.
CREATE FUNCTION werk.push(jobtype text, args jsonb, opts jsonb DEFAULT '{}') RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    taken text;
BEGIN
    IF jsonb_typeof(opts) IS DISTINCT FROM 'object' AND opts IS NOT NULL THEN
        PERFORM werk._invalid('opts', 'must be a JSON object');
    END IF;
    SELECT string_agg(k, ', ' ORDER BY k) INTO taken FROM jsonb_object_keys(opts) AS k
    WHERE k IN ('jobtype', 'args');
    IF taken IS NOT NULL THEN
        PERFORM werk._invalid(taken, 'is an argument of werk.push, not an option');
    END IF;
    RETURN (SELECT p FROM werk.push_many(jsonb_build_array(
        coalesce(opts, '{}') || jsonb_build_object('jobtype', jobtype, 'args', args))) AS p);
END
$$;

-- Complete the attempt `lease` holds, in the caller's transaction. False when the lease is not
-- the job's current one (expired, settled, another attempt's): nothing is changed, and the
-- caller decides (usually: roll back the side effect). A job pushed with keep_result_for stays
-- readable as completed with `result`; any other is deleted (the server's
-- WERK_COMPLETED_RETENTION applies to acks over HTTP and FWP only).
CREATE FUNCTION werk.ack(jid text, lease text, result jsonb DEFAULT NULL) RETURNS boolean
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
        UPDATE werk_jobs j
        SET state = 'completed', lease = NULL, lease_expires_at = NULL, finished_at = now_,
            result = ack.result,
            keep_until = now_ + make_interval(secs => coalesce(j.keep_result_for, 0))
        WHERE j.jid = ack.jid AND j.lease = lease_id
        RETURNING j.queue INTO queue_;
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

-- Report that the attempt `lease` holds failed, in the caller's transaction. `error` holds HTTP
-- fail's fields: errtype (default "unknown"), message, backtrace (array of strings), retry_in
-- (seconds instead of the backoff), retry (false: dead now). The job's retry policy decides, as
-- for every failure (werk_failure_outcome). Returns what was done: 'scheduled' (retried after
-- the backoff), 'dead' or 'discarded'; NULL when the lease is not current (nothing changed).
CREATE FUNCTION werk.fail(jid text, lease text, error jsonb DEFAULT '{}') RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    lease_id uuid;
    now_ timestamptz := statement_timestamp();
    errtype_ text;
    message_ text;
    backtrace_ text[];
    retry_in float8;
    no_retry boolean := false;
    extra text;
    target record;
    outcome text;
BEGIN
    error := coalesce(jsonb_strip_nulls(error), '{}');
    IF jsonb_typeof(error) <> 'object' THEN
        PERFORM werk._invalid('error', 'must be a JSON object');
    END IF;
    SELECT string_agg(k, ', ' ORDER BY k) INTO extra FROM jsonb_object_keys(error) AS k
    WHERE k NOT IN ('errtype', 'message', 'backtrace', 'retry_in', 'retry');
    IF extra IS NOT NULL THEN
        PERFORM werk._invalid('error.' || extra, 'is not a failure field');
    END IF;
    IF error ? 'errtype' AND (jsonb_typeof(error -> 'errtype') <> 'string'
                              OR length(error ->> 'errtype') > 200) THEN
        PERFORM werk._invalid('error.errtype', 'must be a string of at most 200 characters');
    END IF;
    IF error ? 'message' AND (jsonb_typeof(error -> 'message') <> 'string'
                              OR length(error ->> 'message') > 10000) THEN
        PERFORM werk._invalid('error.message', 'must be a string of at most 10000 characters');
    END IF;
    IF error ? 'backtrace' AND (jsonb_typeof(error -> 'backtrace') <> 'array'
        OR jsonb_array_length(error -> 'backtrace') > 1000
        OR EXISTS (SELECT 1 FROM jsonb_array_elements(error -> 'backtrace') AS l
                   WHERE jsonb_typeof(l) <> 'string' OR length(l #>> '{}') > 10000)) THEN
        PERFORM werk._invalid('error.backtrace', 'must be at most 1000 strings of at most '
                                                 '10000 characters');
    END IF;
    IF error ? 'retry' AND error -> 'retry' <> 'false' THEN
        PERFORM werk._invalid('error.retry', 'may only be false (do not retry)');
    END IF;
    errtype_ := coalesce(error ->> 'errtype', 'unknown');
    message_ := coalesce(error ->> 'message', '');
    backtrace_ := coalesce(ARRAY(SELECT jsonb_array_elements_text(error -> 'backtrace')), '{}');
    retry_in := werk._seconds(error -> 'retry_in', 365 * 86400, true, 'error.retry_in');
    no_retry := error ? 'retry';
    IF lease !~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$' THEN
        RETURN NULL;
    END IF;
    lease_id := lease::uuid;
    -- As job_fail.sql: the attempt is checked under the row lock.
    SELECT j.jid, j.queue, j.retry_count,
           werk_failure_outcome(j.retry, j.retry_count + 1, no_retry, j.orphans, 0) AS outcome
    INTO target
    FROM werk_jobs j
    WHERE j.jid = fail.jid AND j.lease = lease_id
    FOR UPDATE;
    IF target.jid IS NULL THEN
        RETURN NULL;
    END IF;
    IF target.outcome = 'discard' THEN
        DELETE FROM werk_jobs j WHERE j.jid = target.jid;
        outcome := 'discarded';
    ELSE
        UPDATE werk_jobs j
        SET state = CASE WHEN target.outcome = 'dead' THEN 'dead' ELSE 'scheduled'
                    END::werk_job_state,
            run_at = CASE WHEN target.outcome = 'retry'
                          THEN least(now_ + coalesce(make_interval(secs => retry_in),
                                                     werk_retry_delay(target.retry_count)),
                                     '9999-12-31 23:59:59.999999+00'::timestamptz)
                          ELSE j.run_at END,
            finished_at = CASE WHEN target.outcome = 'dead' THEN now_ END,
            lease = NULL,
            lease_expires_at = NULL,
            retry_count = j.retry_count + 1,
            failed_at = now_,
            errtype = errtype_,
            message = message_,
            error_backtrace = backtrace_
        WHERE j.jid = target.jid;
        outcome := CASE WHEN target.outcome = 'dead' THEN 'dead' ELSE 'scheduled' END;
    END IF;
    INSERT INTO werk_counters AS k (day, queue, shard, processed, failed)
    VALUES ((now_ AT TIME ZONE 'UTC')::date, target.queue, floor(random() * 16)::smallint, 1, 1)
    ON CONFLICT (day, queue, shard)
    DO UPDATE SET processed = k.processed + 1, failed = k.failed + 1;
    IF outcome <> 'scheduled' THEN
        PERFORM pg_notify('werk_jobs', 'sql|#' || fail.jid);
    END IF;
    RETURN outcome;
END
$$;

-- Fix every function's search path to this schema (where Werk's tables are), so that a caller's
-- search_path cannot put its own objects in their way; and keep them from PUBLIC.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = 'werk'::regnamespace LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$$;
REVOKE ALL ON TYPE werk._job FROM PUBLIC;

-- werk_app: the role an application's login role is granted to use the interface. Roles belong to
-- the whole cluster: it is created once (which needs CREATEROLE) and granted in each database.
-- A migrating user without CREATEROLE gets a warning and the interface without the role; an
-- administrator then runs the statements the README lists ("Enqueue and complete inside your
-- transaction"), the same as below.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'werk_app') THEN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = current_user
                       AND (rolcreaterole OR rolsuper)) THEN
            RAISE WARNING 'the role werk_app does not exist and % may not create it (no '
                          'CREATEROLE): the SQL interface werk.* is usable by % only until an '
                          'administrator creates werk_app and grants it (see the README, '
                          '"Enqueue and complete inside your transaction")',
                          current_user, current_user;
            RETURN;
        END IF;
        BEGIN
            CREATE ROLE werk_app NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;  -- created meanwhile by a migration of another database of this cluster
        END;
    END IF;
    GRANT USAGE ON SCHEMA werk TO werk_app;
    GRANT EXECUTE ON FUNCTION werk.push(text, jsonb, jsonb), werk.push_many(jsonb),
        werk.ack(text, text, jsonb), werk.fail(text, text, jsonb) TO werk_app;
END
$$;
