-- A CHECK constraint is evaluated on every row an UPDATE writes, whichever columns it sets: every
-- claim, extend, fail, expiry and promotion re-checked the jid's length, the queue name's pattern,
-- the type of args and custom and the ranges of the job's options, none of which can change after
-- the push. A domain's CHECK is evaluated only where a value is assigned to it (an INSERT, or an
-- UPDATE that SETs that column), so the checks on the columns that are written once, or seldom,
-- move into domains: the rules are the same and still the schema's, checked as often as the
-- columns are written. The checks that tie columns together (a lease iff active, ...) stay on the
-- table.
--
-- The domains are created without their checks, so that retyping the columns is a relabelling
-- (the table is not rewritten), then given their checks, each read once over the stored rows.
-- Three indexes over retyped columns are rebuilt. The job table is locked meanwhile, for a time
-- that grows with its size.
CREATE DOMAIN werk_jid AS text;
CREATE DOMAIN werk_jobtype AS text;
CREATE DOMAIN werk_queue_name AS text;
CREATE DOMAIN werk_args AS jsonb;
CREATE DOMAIN werk_custom AS jsonb;
CREATE DOMAIN werk_priority AS integer;
CREATE DOMAIN werk_reserve_for AS integer;
CREATE DOMAIN werk_retry AS integer;
CREATE DOMAIN werk_backtrace AS integer;
CREATE DOMAIN werk_count AS integer;
CREATE DOMAIN werk_errtype AS text;
CREATE DOMAIN werk_message AS text;
ALTER TABLE werk_jobs
    ALTER COLUMN jid TYPE werk_jid COLLATE "C",
    ALTER COLUMN jobtype TYPE werk_jobtype,
    ALTER COLUMN queue TYPE werk_queue_name COLLATE "C",
    ALTER COLUMN args TYPE werk_args,
    ALTER COLUMN custom TYPE werk_custom,
    ALTER COLUMN priority TYPE werk_priority,
    ALTER COLUMN reserve_for TYPE werk_reserve_for,
    ALTER COLUMN retry TYPE werk_retry,
    ALTER COLUMN backtrace TYPE werk_backtrace,
    ALTER COLUMN attempt TYPE werk_count,
    ALTER COLUMN orphans TYPE werk_count,
    ALTER COLUMN retry_count TYPE werk_count,
    ALTER COLUMN errtype TYPE werk_errtype,
    ALTER COLUMN message TYPE werk_message;
ALTER DOMAIN werk_jid ADD CHECK (length(VALUE) BETWEEN 8 AND 100);
ALTER DOMAIN werk_jobtype ADD CHECK (length(VALUE) BETWEEN 1 AND 200);
ALTER DOMAIN werk_queue_name ADD CHECK (VALUE ~ '^[A-Za-z0-9._-]+$' AND length(VALUE) <= 100);
ALTER DOMAIN werk_args ADD CHECK (jsonb_typeof(VALUE) = 'array');
ALTER DOMAIN werk_custom ADD CHECK (jsonb_typeof(VALUE) = 'object');
ALTER DOMAIN werk_priority ADD CHECK (VALUE BETWEEN -1000 AND 1000);
ALTER DOMAIN werk_reserve_for ADD CHECK (VALUE BETWEEN 60 AND 86400);
ALTER DOMAIN werk_retry ADD CHECK (VALUE BETWEEN -1 AND 1000);
ALTER DOMAIN werk_backtrace ADD CHECK (VALUE BETWEEN 0 AND 1000);
ALTER DOMAIN werk_count ADD CHECK (VALUE >= 0);
ALTER DOMAIN werk_errtype ADD CHECK (length(VALUE) <= 200);
ALTER DOMAIN werk_message ADD CHECK (length(VALUE) <= 10000);
ALTER TABLE werk_jobs
    DROP CONSTRAINT werk_jobs_jid_check,
    DROP CONSTRAINT werk_jobs_jobtype_check,
    DROP CONSTRAINT werk_jobs_queue_check,
    DROP CONSTRAINT werk_jobs_args_check,
    DROP CONSTRAINT werk_jobs_custom_check,
    DROP CONSTRAINT werk_jobs_priority_check,
    DROP CONSTRAINT werk_jobs_reserve_for_check,
    DROP CONSTRAINT werk_jobs_retry_check,
    DROP CONSTRAINT werk_jobs_backtrace_check,
    DROP CONSTRAINT werk_jobs_attempt_check,
    DROP CONSTRAINT werk_jobs_orphans_check,
    DROP CONSTRAINT werk_jobs_retry_count_check,
    DROP CONSTRAINT werk_jobs_errtype_check,
    DROP CONSTRAINT werk_jobs_message_check;
