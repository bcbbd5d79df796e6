-- The job of job_push.sql when it is alone, as plain values.
(VALUES ($2::text, $3::text, $4::text, $5::text, $6::int, $7::int, $8::int, $9::int, $10::text,
         $11::timestamptz, $13::text, 1::bigint))
