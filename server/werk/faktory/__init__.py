"""Faktory's wire protocol (FWP) over TCP: a thin translation layer beside ``werk.api`` that
lets existing Faktory clients push and work Werk's jobs. See README.md in this folder."""
