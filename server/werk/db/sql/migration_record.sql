INSERT INTO werk_schema_migrations (version, name) VALUES ($1, $2)
