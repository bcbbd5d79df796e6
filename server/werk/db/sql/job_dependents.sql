-- The jobs depending on job $1 (at most $2, by jid): each with its policy, how the edge was
-- settled (NULL: not yet) and the dependent's state.
SELECT e.jid, e.on_failure::text AS on_failure, e.outcome, j.state::text AS state
FROM werk_job_deps e
JOIN werk_stored_jobs j ON j.jid = e.jid
WHERE e.dep = $1
ORDER BY e.jid
LIMIT $2
