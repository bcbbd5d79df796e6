SELECT EXISTS (SELECT 1 FROM werk_stored_jobs WHERE jid = $1)
