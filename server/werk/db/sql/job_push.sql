-- Push jobs. Existing jids are left alone (a retried push is idempotent); only the jobs inserted
-- are returned, the caller reads the others (job_get_many).
-- $1 now (NULL = database clock), $2..$11 the jobs' fields, $12 counter shard, $13 per job the
-- worker id of a fetch waiting for it on this node (NULL: none): such a job, if it is due, not
-- expired and its queue is not paused, is stored already reserved by that worker (attempt 1,
-- fresh lease), so the waiting fetch is answered by this commit without a claim of its own.
-- Per job also its expiry ($14/$24 expires_at, $15/$25 expires_in: seconds from `at` or now)
-- and keep_result_for ($16/$26).
-- Four choices make the variants, each a part below: how the jobs come (jobs: one, many,
-- keyed), what an existing jid or a held unique key does (release: hold, release; kept: any,
-- unkept; taken: checked, minted; conflict: new, dedupe, holder), what is answered (answer: rows,
-- decided, jids, met) and what counts as pushed (tally: each, all, created). Unique keys come
-- only as keyed with release, holder, created and met; a lone job only with each.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
/*release*/
input AS (
    SELECT t.*,
           t.at IS NULL OR t.at <= c.now AS due,
           t.wid IS NOT NULL AND (t.at IS NULL OR t.at <= c.now)
             AND (t.expires_at IS NULL OR t.expires_at > c.now)
             AND NOT EXISTS (SELECT 1 FROM werk_queues p WHERE p.name = t.queue AND p.paused)
             AS handed,
           -- Time bounds count from `at`, or from now for a job due already; capped at the
           -- last time Werk stores (domain/times.py).
           CASE WHEN t.expires_in IS NOT NULL
                THEN least(greatest(coalesce(t.at, c.now), c.now)
                           + make_interval(secs => t.expires_in),
                           '9999-12-31 23:59:59.999999+00'::timestamptz)
           END AS expires_after,
           CASE WHEN t.unique_for IS NOT NULL
                THEN least(greatest(coalesce(t.at, c.now), c.now)
                           + make_interval(secs => t.unique_for),
                           '9999-12-31 23:59:59.999999+00'::timestamptz)
           END AS unique_until
    FROM /*jobs*/ AS t(jid, jobtype, queue, args, priority, reserve_for, retry, backtrace,
                       custom, at, wid, expires_at, expires_in, keep_result_for, unique_key,
                       unique_for, unique_spec, ord)
    CROSS JOIN clock c
),
inserted AS (
    INSERT INTO werk_jobs (jid, jobtype, queue, args, priority, reserve_for, retry, backtrace,
                           custom, at, state, run_at, created_at, enqueued_at, attempt, lease,
                           lease_expires_at, wid, expires_at, keep_result_for, unique_key,
                           unique_until, unique_spec)
    SELECT i.jid, i.jobtype, i.queue, i.args::jsonb, i.priority, i.reserve_for, i.retry,
           i.backtrace, i.custom::jsonb, i.at,
           CASE WHEN i.handed THEN 'active' WHEN i.due THEN 'available' ELSE 'scheduled'
           END::werk_job_state,
           greatest(coalesce(i.at, c.now), c.now),
           c.now,
           CASE WHEN i.due THEN c.now END,
           CASE WHEN i.handed THEN 1 ELSE 0 END,
           CASE WHEN i.handed THEN gen_random_uuid() END,
           CASE WHEN i.handed THEN c.now + make_interval(secs => i.reserve_for) END,
           CASE WHEN i.handed THEN i.wid END,
           coalesce(i.expires_at, i.expires_after),
           i.keep_result_for,
           i.unique_key,
           i.unique_until,
           i.unique_spec::jsonb
    FROM input i CROSS JOIN clock c
    /*kept*/
    ORDER BY i.ord
    /*conflict*/
    RETURNING /*answer*/
),
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, pushed)
    SELECT (c.now AT TIME ZONE 'UTC')::date, i.queue, $12::smallint, /*tally*/
    ON CONFLICT (day, queue, shard) DO UPDATE SET pushed = k.pushed + excluded.pushed
)
SELECT * FROM inserted
/*taken*/

-- part one: a lone job, as plain values (no arrays to encode and unnest for one job).
(VALUES ($2::text, $3::text, $4::text, $5::text, $6::int, $7::int, $8::int, $9::int, $10::text,
         $11::timestamptz, $13::text, $14::timestamptz, $15::float8, $16::int, NULL::text,
         NULL::float8, NULL::text, 1::bigint))

-- part many: the jobs as per-job arrays, in order. A column in which every job holds the same
-- value (the queue, the defaults, no `at`, no waiting fetch) comes as an empty array plus that
-- value in $14..$23, so the server encodes it once: unnest pads the short array with NULLs and
-- coalesce fills them in. The rare columns ($24, $25 expiry, $26 keep_result_for) come empty
-- when no job uses them.
(SELECT u.jid, coalesce(u.jobtype, $14::text), coalesce(u.queue, $15::text),
        coalesce(u.args, $16::text), coalesce(u.priority, $17::int),
        coalesce(u.reserve_for, $18::int), coalesce(u.retry, $19::int),
        coalesce(u.backtrace, $20::int), coalesce(u.custom, $21::text),
        coalesce(u.at, $22::timestamptz), coalesce(u.wid, $23::text), u.expires_at,
        u.expires_in, u.keep_result_for, NULL::text, NULL::float8, NULL::text, u.ord
 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[],
             $9::int[], $10::text[], $11::timestamptz[], $13::text[], $24::timestamptz[],
             $25::float8[], $26::int[]) WITH ORDINALITY
      AS u(jid, jobtype, queue, args, priority, reserve_for, retry, backtrace, custom, at, wid,
           expires_at, expires_in, keep_result_for, ord))

-- part keyed: part many, with per job its unique key ($27), time bound in seconds ($28) and
-- what the producer asked ($29, JSON text); jids that exist are left out (the caller reads
-- them). Reading the release CTE makes it run first, so the keys it frees are free for the
-- insert.
(SELECT u.jid, coalesce(u.jobtype, $14::text), coalesce(u.queue, $15::text),
        coalesce(u.args, $16::text), coalesce(u.priority, $17::int),
        coalesce(u.reserve_for, $18::int), coalesce(u.retry, $19::int),
        coalesce(u.backtrace, $20::int), coalesce(u.custom, $21::text),
        coalesce(u.at, $22::timestamptz), coalesce(u.wid, $23::text), u.expires_at,
        u.expires_in, u.keep_result_for, u.unique_key, u.unique_for, u.unique_spec, u.ord
 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[],
             $9::int[], $10::text[], $11::timestamptz[], $13::text[], $24::timestamptz[],
             $25::float8[], $26::int[], $27::text[], $28::float8[], $29::text[]) WITH ORDINALITY
      AS u(jid, jobtype, queue, args, priority, reserve_for, retry, backtrace, custom, at, wid,
           expires_at, expires_in, keep_result_for, unique_key, unique_for, unique_spec, ord)
 WHERE (SELECT count(*) FROM released) >= 0
   AND NOT EXISTS (SELECT 1 FROM werk_stored_jobs e WHERE e.jid = u.jid))

-- part hold: no unique keys pushed: nothing to release.

-- part release: the keys this push may take from their holders: a lock whose time bound has
-- passed, and (on_conflict replace) one an active job holds: that job keeps running and the new
-- one is stored. Its unique_key cleared, the holder leaves the unique index.
released AS (
    UPDATE werk_jobs j
    SET unique_key = NULL
    FROM unnest($27::text[], $29::text[]) AS k(key, spec), clock c
    WHERE j.unique_key = k.key
      AND j.state IN ('scheduled', 'available', 'active')
      AND (j.unique_until <= c.now
           OR (j.state = 'active' AND k.spec::jsonb ->> 'on_conflict' = 'replace'))
    RETURNING j.jid
),

-- part any: every job is written (an existing jid, kept completed or not, fails or conflicts).

-- part unkept: the jids kept completed are left out (dedupe: the caller reads them).
WHERE NOT EXISTS (SELECT 1 FROM werk_completed_jobs k WHERE k.jid = i.jid)

-- part new: the jids are taken to be new, which spares PostgreSQL the conflict check per job: one
-- that exists fails the whole statement (unique_violation on werk_jobs_pkey) and the caller writes
-- it again with part dedupe.

-- part dedupe: jids that may exist already; those jobs are left alone.
ON CONFLICT (jid) DO NOTHING

-- part holder: a key another job holds. The holder is returned (its jid names it in the
-- answer), locked; with on_conflict replace, a holder still waiting takes the new job's args and
-- `at` (and its state, run_at, time bound, expiry and request with them: an expiry counted from
-- the old `at` could come before the new one); it keeps its place in the queue if it stays
-- available. Any other conflict writes the holder unchanged.
ON CONFLICT (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('scheduled', 'available', 'active')
DO UPDATE SET
    args = CASE WHEN werk_replaces(excluded.unique_spec, werk_jobs.state)
                THEN excluded.args ELSE werk_jobs.args END,
    at = CASE WHEN werk_replaces(excluded.unique_spec, werk_jobs.state)
              THEN excluded.at ELSE werk_jobs.at END,
    state = CASE WHEN werk_replaces(excluded.unique_spec, werk_jobs.state)
                 THEN excluded.state ELSE werk_jobs.state END,
    run_at = CASE WHEN werk_replaces(excluded.unique_spec, werk_jobs.state)
                  THEN excluded.run_at ELSE werk_jobs.run_at END,
    enqueued_at = CASE WHEN werk_replaces(excluded.unique_spec, werk_jobs.state)
                            AND NOT (werk_jobs.state = 'available' AND excluded.state = 'available')
                       THEN excluded.enqueued_at ELSE werk_jobs.enqueued_at END,
    seq = CASE WHEN werk_replaces(excluded.unique_spec, werk_jobs.state)
                    AND NOT (werk_jobs.state = 'available' AND excluded.state = 'available')
               THEN excluded.seq ELSE werk_jobs.seq END,
    unique_until = CASE WHEN werk_replaces(excluded.unique_spec, werk_jobs.state)
                        THEN excluded.unique_until ELSE werk_jobs.unique_until END,
    expires_at = CASE WHEN werk_replaces(excluded.unique_spec, werk_jobs.state)
                      THEN excluded.expires_at ELSE werk_jobs.expires_at END,
    unique_spec = CASE WHEN werk_replaces(excluded.unique_spec, werk_jobs.state)
                       THEN excluded.unique_spec ELSE werk_jobs.unique_spec END

-- part rows: the inserted jobs; has_options as the claim (job_fetch.sql) says it, for the jobs
-- handed to waiting fetches.
*, num_nonnulls(keep_result_for, expires_at, unique_spec, batch, dependencies) > 0 AS has_options

-- part decided: what the statement decided for each inserted job, for a push that hands no job to
-- a fetch. The rest of the job is stored as it was sent, and the caller answers with that instead
-- of reading it back and decoding every column.
jid, queue, state, at, created_at, enqueued_at, expires_at

-- part jids: what the caller needs to wake waiting fetches.
jid, queue, state

-- part met: the jobs inserted and the holders met, each whole; created says which is which
-- (a pushed jid never names a holder: the jids that exist were left out).
*, jid = ANY($2::text[]) AS created

-- part checked: a jid kept completed (werk_completed_jobs) is taken, as one in werk_jobs: the
-- check, once the insert is done, fails the statement as werk_jobs_pkey would
-- (0017_completed_jobs_table.sql).
WHERE (SELECT werk_jids_free(ARRAY(SELECT jid FROM inserted)))

-- part minted: every jid was made by the server for this push (domain/jids.py): none names a
-- kept job, so none is looked up.

-- part each: a lone job (part one) counts one, with no grouping to set up.
1 FROM inserted i CROSS JOIN clock c

-- part all: every inserted row counts as pushed, per queue.
count(*) FROM inserted i CROSS JOIN clock c GROUP BY 1, 2

-- part created: only the rows inserted count as pushed, not the holders met.
count(*) FROM inserted i CROSS JOIN clock c WHERE i.created GROUP BY 1, 2
