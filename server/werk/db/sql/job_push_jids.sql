-- job_push.sql's short answer: what the caller needs to wake waiting fetches.
jid, queue, state
