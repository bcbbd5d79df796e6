-- The jobs of job_push.sql as per-job arrays, in order. A column in which every job holds the
-- same value (the queue, the defaults, no `at`, no waiting fetch) comes as an empty array plus
-- that value in $14..$23: unnest pads the short array with NULLs and coalesce fills them in.
-- Encoding 1,000 equal elements cost the server 0.2-0.3 us per element.
(SELECT u.jid, coalesce(u.jobtype, $14::text), coalesce(u.queue, $15::text),
        coalesce(u.args, $16::text), coalesce(u.priority, $17::int),
        coalesce(u.reserve_for, $18::int), coalesce(u.retry, $19::int),
        coalesce(u.backtrace, $20::int), coalesce(u.custom, $21::text),
        coalesce(u.at, $22::timestamptz), coalesce(u.wid, $23::text), u.ord
 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[],
             $9::int[], $10::text[], $11::timestamptz[], $13::text[]) WITH ORDINALITY
      AS u(jid, jobtype, queue, args, priority, reserve_for, retry, backtrace, custom, at, wid, ord))
