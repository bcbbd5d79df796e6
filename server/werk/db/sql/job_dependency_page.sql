-- A page of the dependencies of job $1 in dep order, after the dep $2 (NULL: from the first),
-- at most $3 rows, with their results (as job_dependencies.sql). `within`: the results so far
-- add up to at most $4 bytes, or this is the page's first row (a page carries at least one
-- result, whatever its size); the caller ends the page at the first row not within.
SELECT jid, dep, ref, on_failure::text AS on_failure, outcome,
       CASE WHEN within THEN result END AS result, false AS result_omitted, settled_at, within
FROM (
    SELECT e.jid, e.dep, e.ref, e.on_failure, e.outcome, r.result, e.settled_at,
           row_number() OVER w = 1 OR coalesce(sum(r.result_size) OVER w, 0) <= $4 AS within
    FROM werk_job_deps e
    LEFT JOIN werk_dep_results r ON r.dep = e.dep AND r.completed_at = e.result_at
    WHERE e.jid = $1 AND ($2::text IS NULL OR e.dep > $2)
    WINDOW w AS (ORDER BY e.dep ROWS UNBOUNDED PRECEDING)
    ORDER BY e.dep
    LIMIT $3
) d
ORDER BY dep
