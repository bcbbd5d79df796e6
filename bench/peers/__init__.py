"""The `peers` scenario: Werk beside the PostgreSQL job queues users would choose instead, each
through its own library (see bench/README.md)."""
