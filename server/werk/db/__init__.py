"""Everything that touches PostgreSQL: the pool, migrations, and all SQL (in ``sql/*.sql``)."""
