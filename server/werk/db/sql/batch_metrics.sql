-- Batches stored, by state, and the callbacks of the batches stored that were released, by
-- kind, for /metrics.
SELECT count(*) FILTER (WHERE NOT committed)::bigint AS open,
       count(*) FILTER (WHERE committed AND completed_at IS NULL)::bigint AS committed,
       count(*) FILTER (WHERE completed_at IS NOT NULL)::bigint AS finished,
       count(*) FILTER (WHERE complete_jid IS NOT NULL AND completed_at IS NOT NULL)::bigint
           AS complete,
       count(*) FILTER (WHERE success_jid IS NOT NULL AND succeeded_at IS NOT NULL)::bigint
           AS success,
       count(*) FILTER (WHERE death_jid IS NOT NULL AND died_at IS NOT NULL)::bigint AS death
FROM werk_batches
