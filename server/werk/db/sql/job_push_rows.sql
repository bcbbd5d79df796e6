-- job_push.sql's answer: the inserted jobs.
*
