SELECT * FROM werk_jobs WHERE jid = $1
