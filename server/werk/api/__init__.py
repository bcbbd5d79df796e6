"""HTTP translation: wire schemas, routes, problem+json rendering. No SQL, no decisions."""
