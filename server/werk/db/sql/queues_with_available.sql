-- Which of the queues in $1 have a job ready now (the long-poll safety net: one cheap query per
-- node per interval, whatever the number of waiting requests).
SELECT q.name
FROM unnest($1::text[]) AS q(name)
WHERE EXISTS (SELECT 1 FROM werk_jobs j WHERE j.state = 'available' AND j.queue = q.name)
  AND NOT EXISTS (SELECT 1 FROM werk_queues p WHERE p.name = q.name AND p.paused)
