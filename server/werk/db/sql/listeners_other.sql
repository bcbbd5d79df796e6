-- How many Werk LISTEN connections to this database there are besides backend $1 (the asking
-- process's own); their sessions are named $2. A process that counts none sends no NOTIFY.
SELECT count(*)::int AS n
FROM pg_stat_activity
WHERE datname = current_database() AND application_name = $2 AND pid <> $1
