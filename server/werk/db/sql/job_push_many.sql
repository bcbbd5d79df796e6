-- The jobs of job_push.sql as per-job arrays, in order.
unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[],
       $9::int[], $10::text[], $11::timestamptz[], $13::text[]) WITH ORDINALITY
