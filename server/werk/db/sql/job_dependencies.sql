-- The dependencies of the jobs $1: per edge the dependent (jid), the dependency (dep), the ref
-- that named it at push, its policy, and how it ended (outcome NULL: not settled yet), with its
-- result when it completed. Read by the primary key's twin, werk_job_deps_job_idx.
SELECT e.jid, e.dep, e.ref, e.on_failure::text AS on_failure, e.outcome, e.result, e.settled_at
FROM werk_job_deps e
WHERE e.jid = ANY ($1::text[])
ORDER BY e.jid, e.dep
