SELECT coalesce(max(version), 0) FROM werk_schema_migrations
