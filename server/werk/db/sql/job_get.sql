SELECT * FROM werk_stored_jobs WHERE jid = $1
