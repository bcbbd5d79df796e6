"""Werk: a language-agnostic background-job server on HTTP and PostgreSQL."""

__version__ = "0.1.0"
