"""Werk benchmark harness: `python -m bench run all` (see bench/README.md)."""
