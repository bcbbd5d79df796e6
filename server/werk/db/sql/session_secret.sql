-- The installation's key for session cookies (see session_secret_offer.sql).
SELECT secret FROM werk_session_secret WHERE singleton
