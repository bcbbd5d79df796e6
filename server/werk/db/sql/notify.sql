-- Tell the other nodes that jobs arrived in these queues (comma-separated payload).
SELECT pg_notify('werk_jobs', $1)
