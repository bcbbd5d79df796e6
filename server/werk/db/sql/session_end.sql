-- Log out: the session ends on every node.
DELETE FROM werk_sessions WHERE id = $1
