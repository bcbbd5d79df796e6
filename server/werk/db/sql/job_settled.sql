-- Which of the jids $1 name a job that is settled (its state is none of $2) or is not stored:
-- the requests waiting for their results look again.
SELECT w.jid
FROM unnest($1::text[]) AS w(jid)
LEFT JOIN werk_stored_jobs j ON j.jid = w.jid
WHERE j.jid IS NULL OR NOT (j.state::text = ANY ($2::text[]))
