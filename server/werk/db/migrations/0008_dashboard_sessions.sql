-- Dashboard login sessions, kept where every node sees them.

-- The key that signs session cookies when WERK_SESSION_SECRET is not set: random, made by the
-- first node that needs it, one per installation. Without it the cookies would be keyed by what
-- WERK_TOKENS holds, and whoever can read that configuration could mint an admin session.
CREATE TABLE werk_session_secret (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    secret bytea NOT NULL CHECK (length(secret) >= 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per live login. A cookie is honoured only while its row exists and has not expired,
-- so logging out (deleting the row) ends the session on every node, and the lifetime is the
-- server's, not what the cookie says. The cookie's id is kept only as its SHA-256.
CREATE TABLE werk_sessions (
    id bytea PRIMARY KEY CHECK (length(id) = 32),
    holder text NOT NULL CHECK (length(holder) BETWEEN 1 AND 100),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL CHECK (expires_at > created_at)
);
CREATE INDEX werk_sessions_expires_idx ON werk_sessions (expires_at);
