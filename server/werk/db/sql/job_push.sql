-- Push jobs. Existing jids are left alone (a retried push is idempotent); only the jobs inserted
-- are returned, the caller reads the others (job_get_many).
-- $1 now (NULL = database clock), $2..$11 the jobs' fields, $12 counter shard, $13 per job the
-- worker id of a fetch waiting for it on this node (NULL: none): such a job, if it is due and
-- its queue is not paused, is stored already reserved by that worker (attempt 1, fresh lease),
-- so the waiting fetch is answered by this commit without a claim of its own. keep_result_for
-- comes last ($14 for one job, $24 and $25 for many).
-- Three choices make the variants, each a part below: how the jobs come (jobs: one, many), what
-- an existing jid does (conflict: new, dedupe) and what is answered (answer: rows, decided, jids).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
input AS (
    SELECT t.*,
           t.at IS NULL OR t.at <= c.now AS due,
           t.wid IS NOT NULL AND (t.at IS NULL OR t.at <= c.now)
             AND NOT EXISTS (SELECT 1 FROM werk_queues p WHERE p.name = t.queue AND p.paused)
             AS handed
    FROM /*jobs*/ AS t(jid, jobtype, queue, args, priority, reserve_for, retry, backtrace,
                       custom, at, wid, ord, keep_result_for)
    CROSS JOIN clock c
),
inserted AS (
    INSERT INTO werk_jobs (jid, jobtype, queue, args, priority, reserve_for, retry, backtrace,
                           custom, at, state, run_at, created_at, enqueued_at, attempt, lease,
                           lease_expires_at, wid, keep_result_for)
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
           i.keep_result_for
    FROM input i CROSS JOIN clock c
    ORDER BY i.ord
    /*conflict*/
    RETURNING /*answer*/
),
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, pushed)
    SELECT (c.now AT TIME ZONE 'UTC')::date, i.queue, $12::smallint, count(*)
    FROM inserted i CROSS JOIN clock c
    GROUP BY 1, 2
    ON CONFLICT (day, queue, shard) DO UPDATE SET pushed = k.pushed + excluded.pushed
)
SELECT * FROM inserted

-- part one: a lone job, as plain values (no arrays to encode and unnest for one job).
(VALUES ($2::text, $3::text, $4::text, $5::text, $6::int, $7::int, $8::int, $9::int, $10::text,
         $11::timestamptz, $13::text, 1::bigint, $14::int))

-- part many: the jobs as per-job arrays, in order. A column in which every job holds the same
-- value (the queue, the defaults, no `at`, no waiting fetch) comes as an empty array plus that
-- value in $14..$23, so the server encodes it once: unnest pads the short array with NULLs and
-- coalesce fills them in.
(SELECT u.jid, coalesce(u.jobtype, $14::text), coalesce(u.queue, $15::text),
        coalesce(u.args, $16::text), coalesce(u.priority, $17::int),
        coalesce(u.reserve_for, $18::int), coalesce(u.retry, $19::int),
        coalesce(u.backtrace, $20::int), coalesce(u.custom, $21::text),
        coalesce(u.at, $22::timestamptz), coalesce(u.wid, $23::text), u.ord,
        coalesce(u.keep_result_for, $25::int)
 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[],
             $9::int[], $10::text[], $11::timestamptz[], $13::text[], $24::int[]) WITH ORDINALITY
      AS u(jid, jobtype, queue, args, priority, reserve_for, retry, backtrace, custom, at, wid,
           keep_result_for, ord))

-- part new: the jids are taken to be new, which spares PostgreSQL the conflict check per job: one
-- that exists fails the whole statement (unique_violation on werk_jobs_pkey) and the caller writes
-- it again with part dedupe.

-- part dedupe: jids that may exist already; those jobs are left alone.
ON CONFLICT (jid) DO NOTHING

-- part rows: the inserted jobs.
*

-- part decided: what the statement decided for each inserted job, for a push that hands no job to
-- a fetch. The rest of the job is stored as it was sent, and the caller answers with that instead
-- of reading it back and decoding every column.
jid, queue, state, at, created_at, enqueued_at

-- part jids: what the caller needs to wake waiting fetches.
jid, queue, state
