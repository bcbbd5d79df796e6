-- job_push.sql for jids that may exist already: those jobs are left alone.
ON CONFLICT (jid) DO NOTHING
