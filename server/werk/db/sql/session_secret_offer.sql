-- Offer a new random key for session cookies; kept only if none exists yet (the first node to
-- offer wins; the others' offers change nothing). session_secret.sql then reads the one kept.
INSERT INTO werk_session_secret (secret) VALUES ($1)
ON CONFLICT (singleton) DO NOTHING
