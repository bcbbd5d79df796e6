-- Pause (or, with $2 = false, resume) a queue. The queue need not have jobs yet: pausing ahead of
-- time is allowed. Fetch skips paused queues; pushes are still accepted.
INSERT INTO werk_queues AS q (name, paused) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused
RETURNING q.name, q.paused
