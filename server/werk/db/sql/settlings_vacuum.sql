-- werk_settlings takes a row and its deletion for every settled job with dependents or batch;
-- nothing else vacuums it where autovacuum is off, and it stays small, so every pass clears it
-- whole.
VACUUM (SKIP_LOCKED, PARALLEL 0) werk_settlings
