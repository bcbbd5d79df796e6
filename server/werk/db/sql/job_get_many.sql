SELECT * FROM werk_jobs WHERE jid = ANY($1::text[])
