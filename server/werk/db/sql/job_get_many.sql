SELECT * FROM werk_stored_jobs WHERE jid = ANY($1::text[])
