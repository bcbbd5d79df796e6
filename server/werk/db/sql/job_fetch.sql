-- Claim available jobs for one or more fetch requests at once (concurrent fetches over the same
-- queues share this statement and its commit). $3 holds one worker id per wanted job, request
-- after request; the claimed jobs fill those slots in claim order, and each row says its slot.
-- Queues in $2 are tried strictly in the given order (the outer LIMIT stops the lateral scan at
-- the first queues that fill the request), highest priority then oldest first, skipping paused
-- queues and rows other fetchers hold. Each claimed job gets a fresh lease token: the 16 bytes
-- at its slot in $4, a random version 4 UUID the server draws with the others in one call
-- (gen_random_uuid() would draw each job's through OpenSSL, one call per job). A job whose
-- expires_at has come is never handed out, whether or not the upkeep pass has expired it yet;
-- a job locked unique until start gives its key up here.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
wanted AS (
    SELECT q.name, q.ord
    FROM unnest($2::text[]) WITH ORDINALITY AS q(name, ord)
    WHERE NOT EXISTS (SELECT 1 FROM werk_queues p WHERE p.name = q.name AND p.paused)
),
picked AS (
    SELECT c.ctid
    FROM wanted w
    CROSS JOIN LATERAL (
        SELECT j.ctid
        FROM werk_jobs j
        WHERE j.state = 'available' AND j.queue = w.name
          AND (j.expires_at IS NULL OR j.expires_at > coalesce($1::timestamptz, now()))
        ORDER BY j.priority DESC, j.seq
        LIMIT cardinality($3::text[])
        FOR UPDATE SKIP LOCKED
    ) c
    ORDER BY w.ord  -- (sorts the queue list, then walks it: the LIMIT still stops early)
    LIMIT cardinality($3::text[])
),
claimed AS (
    -- Through an array, so the planner sees a small set to fetch by TID whatever it guesses
    -- of $3 (a join on the CTE lets a generic plan hash-join a scan of the whole table). The
    -- worker ids are unnested beside the TIDs (unnest pads the shorter array with NULLs): a
    -- subscript ($3[slot]) walks a text array from its start, once per row.
    SELECT c.ctid, c.wid, c.slot
    FROM unnest((SELECT array_agg(p.ctid) FROM picked p), $3::text[]) WITH ORDINALITY
        AS c(ctid, wid, slot)
    WHERE c.ctid IS NOT NULL
)
UPDATE werk_jobs j
SET state = 'active',
    attempt = j.attempt + 1,
    lease = encode(substring($4::bytea FROM claimed.slot::int * 16 - 15 FOR 16), 'hex')::uuid,
    lease_expires_at = clock.now + make_interval(secs => j.reserve_for),
    wid = claimed.wid,
    unique_key = CASE WHEN j.unique_key IS NULL OR j.unique_spec ->> 'until' = 'start' THEN NULL
                      ELSE j.unique_key END
FROM claimed, clock
WHERE j.ctid = claimed.ctid
-- What the fetch answer, the claim order and a hand-back read: not the columns of a settled
-- job (finished_at, result, keep_until) or of a waiting one, nor the unique key given up here;
-- has_options says whether the answer has more to show than a plain job's keys.
RETURNING claimed.slot, j.jid, j.jobtype, j.queue, j.args, j.priority, j.reserve_for, j.retry,
    j.backtrace, j.custom, j.at, j.state, j.seq, j.run_at, j.created_at, j.enqueued_at,
    j.attempt, j.lease, j.lease_expires_at, j.wid, j.progress, j.retry_count, j.failed_at,
    j.errtype, j.message, j.error_backtrace, j.keep_result_for, j.expires_at, j.unique_spec,
    j.dependents, j.dependencies, j.batch,
    num_nonnulls(j.keep_result_for, j.expires_at, j.unique_spec, j.batch, j.dependencies) > 0
        AS has_options
