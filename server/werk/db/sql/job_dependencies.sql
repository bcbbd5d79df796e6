-- The first $3 dependencies of the jobs $1, in (jid, dep) order: per edge the dependent (jid),
-- the dependency (dep), the ref that named it at push, its policy, and how it ended (outcome
-- NULL: not settled yet), with its result when it completed (werk_dep_results: stored once,
-- named by the edge). Results are carried in that order while their sizes add up to at most $2
-- bytes; after that each is left out (result NULL, result_omitted), to be read from the job's
-- dependency pages (job_dependency_page.sql), as are the dependencies after the first $3.
-- Read by werk_job_deps_job_idx, which gives the jobs in jid order for the limit to stop at
-- (each job's edges sorted as they are read), and each result by its key.
SELECT jid, dep, ref, on_failure, outcome, CASE WHEN within THEN result END AS result,
       result IS NOT NULL AND NOT within AS result_omitted, settled_at
FROM (
    SELECT e.jid, e.dep, e.ref, e.on_failure::text AS on_failure, e.outcome, r.result,
           e.settled_at,
           coalesce(sum(r.result_size) OVER (ORDER BY e.jid, e.dep ROWS UNBOUNDED PRECEDING), 0)
               <= $2 AS within
    FROM (
        SELECT e.* FROM werk_job_deps e
        WHERE e.jid = ANY ($1::text[])
        ORDER BY e.jid, e.dep
        LIMIT $3
    ) e
    LEFT JOIN LATERAL (
        SELECT r.result, r.result_size
        FROM werk_dep_results r
        WHERE r.dep = e.dep AND r.completed_at = e.result_at
        OFFSET 0
    ) r ON true
) d
ORDER BY jid, dep
