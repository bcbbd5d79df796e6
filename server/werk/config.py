"""Typed settings, read once at start-up (flags override ``WERK_*`` environment variables)."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    IPvAnyNetwork,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

LogLevel = Literal["debug", "info", "warning", "error"]
# push: push jobs; work: fetch/ack/fail/extend/beat; metrics: scrape /metrics;
# admin: everything (the admin API and the dashboard included).
Scope = Literal["push", "work", "admin", "metrics"]

TOKENS_HELP = (
    "run `werk token --name ops --scope admin` and put the printed entry in "
    'WERK_TOKENS=\'[{"name":"ops","sha256":"<hex>","scopes":["admin"]}]\''
)


class TokenConfig(BaseModel):
    """A bearer token. Only its SHA-256 is kept in memory; a plaintext ``token`` given in the
    configuration is hashed when the settings are read."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")
    sha256: str | None = Field(None, pattern=r"^[0-9a-fA-F]{64}$")
    token: str | None = Field(None, min_length=16, repr=False)
    scopes: list[Scope] = Field(min_length=1)

    @model_validator(mode="after")
    def _hash_plaintext(self) -> TokenConfig:
        if (self.sha256 is None) == (self.token is None):
            raise ValueError(f"token {self.name!r}: give exactly one of sha256 and token")
        if self.token is not None:
            digest = hashlib.sha256(self.token.encode()).hexdigest()
            object.__setattr__(self, "sha256", digest)
            object.__setattr__(self, "token", None)
        else:
            object.__setattr__(self, "sha256", (self.sha256 or "").lower())
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WERK_", extra="ignore", hide_input_in_errors=True)

    host: str = "127.0.0.1"
    port: int = Field(7420, ge=0, le=65535)
    database_url: str | None = Field(
        None, description="PostgreSQL URL; when absent an embedded PostgreSQL is started."
    )
    database_pooler: Literal["none", "transaction"] = Field(
        "none",
        description="transaction: WERK_DATABASE_URL leads to a transaction-pooling proxy "
        "(PgBouncer pool_mode=transaction), which hands each transaction to any server "
        "connection: Werk then keeps no prepared statements and no session state on it.",
    )
    direct_database_url: str | None = Field(
        None,
        description="With a pooler: PostgreSQL reached directly (not through the pooler), for the "
        "one LISTEN connection per process that wakes long polls across nodes. Without it, a "
        "long poll hears of jobs pushed on another node at its next re-check (poll_interval).",
    )
    data_dir: Path = Field(
        Path(".werk"), description="Where the embedded PostgreSQL keeps its data."
    )
    log_level: LogLevel = "info"
    workers: int = Field(1, ge=1, le=64, description="HTTP worker processes (uvicorn).")

    pool_min_size: int = Field(2, ge=1, description="Connections kept for the job traffic.")
    pool_max_size: int = Field(
        10,
        ge=4,
        description="Connections at most for the job traffic (the single-push, ack and claim "
        "writers keep one each; the rest serve batches, fails and extends).",
    )
    admin_pool_max_size: int = Field(
        3, ge=1, description="Connections at most for maintenance, admin, dashboard and metrics."
    )

    max_body_bytes: int = Field(1024 * 1024, ge=1024)
    max_batch: int = Field(1000, ge=1, le=10000)
    max_fetch_wait: float = Field(30.0, ge=0, le=300)

    # HTTP connections: a client that connects and sends nothing, or sends a request slowly,
    # holds a file descriptor; these bound how long and how many.
    header_timeout: float = Field(
        10.0,
        gt=0,
        description="Seconds a client has to send a whole request head, counted from connecting "
        "or from the request's first byte (idle keep-alive time does not count).",
    )
    body_timeout: float = Field(
        30.0, gt=0, description="Seconds a request body may take to arrive after its head."
    )
    max_header_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="Bytes a request head (request line and headers) may take; a longer one is "
        "answered 431 and its connection closed.",
    )
    max_connections: int = Field(
        2000,
        ge=1,
        description="Open HTTP connections per server process; one beyond it is closed at once.",
    )

    worker_timeout: float = Field(
        60.0, gt=0, description="Seconds without a beat before a worker is gone."
    )
    max_orphans: int = Field(
        3, ge=0, description="Orphanings before a job is dead (0 = unlimited)."
    )
    # Dead rows pile up between VACUUMs in proportion to throughput; autovacuum alone lets a
    # busy job table grow to several times its working size (bench `churn` shows the growth).
    vacuum_interval: float = Field(
        1.5,
        ge=0,
        description="Seconds between VACUUMs of the job table by one node (0 = leave it to "
        "autovacuum).",
    )
    # A whole VACUUM reads every index of the job table in full, and kept jobs (results, dead
    # jobs) sit in most of them: done every pass, the cost of each pass would follow the jobs
    # kept. Between whole passes the heap alone is vacuumed, as autovacuum spaces its passes by
    # a threshold and a fraction of the table.
    vacuum_index_threshold: int = Field(
        1000,
        ge=0,
        description="Rows of the job table updated out of place or deleted since its last "
        "whole VACUUM (heap and indexes) before the next pass is whole again, besides "
        "vacuum_index_scale; the passes between vacuum the heap only.",
    )
    vacuum_index_scale: float = Field(
        0.2,
        ge=0,
        description="Fraction of the job table's rows added to vacuum_index_threshold.",
    )
    maintenance_interval: float = Field(
        1.0, gt=0, description="Seconds between maintenance passes."
    )
    poll_interval: float = Field(
        1.0,
        gt=0,
        description="Long polls re-check the database this often, in case a wake-up was lost.",
    )
    dead_retention_days: float = Field(180.0, gt=0)
    dead_max: int = Field(100_000, ge=0)
    completed_retention: float = Field(
        0.0,
        ge=0,
        description="Seconds to keep every acked job; 0 deletes at ack (a job pushed with "
        "keep_result_for is kept that long, plus this).",
    )
    max_result_bytes: int = Field(
        64 * 1024,
        ge=1,
        le=64 * 1024 * 1024,
        description="Largest job result an ack may store (bytes of JSON); a larger one is "
        "refused with 413 result_too_large.",
    )
    max_dependency_results_bytes: int = Field(
        1024 * 1024,
        ge=0,
        le=1024 * 1024 * 1024,
        description="Most bytes of dependency results one fetch answer or job read carries "
        "(a job may have thousands of dependencies); results beyond it are left out "
        "(result_omitted) and read with GET /v1/jobs/{jid}/dependencies.",
    )
    max_dependencies_listed: int = Field(
        10_000,
        ge=1,
        le=1_000_000,
        description="Most dependencies one fetch answer or job read lists, counted across its "
        "jobs in jid order (a fetch of a hundred jobs with thousands of dependencies each would "
        "otherwise be an answer of hundreds of megabytes); a job listed only in part says "
        "dependencies_omitted, and the rest are read with GET /v1/jobs/{jid}/dependencies.",
    )

    # Search (q) reads werk_jobs_words_idx, which leaves available jobs out so that the job
    # traffic never writes to it; this adds the index that covers them, for those who search
    # large backlogs and accept what each push then pays.
    search_available: bool = Field(
        False,
        description="Keep a words index over available jobs too, so that a search (q) finds "
        "them without reading every available job; each push then writes its words into it. "
        "One node builds it in the background after start-up (CREATE INDEX CONCURRENTLY); "
        "turning this off keeps the index: remove it with `werk search-index --drop`.",
    )
    search_index_check_interval: float = Field(
        60.0,
        gt=0,
        description="With WERK_SEARCH_AVAILABLE, seconds between a node's checks that the search "
        "index over available jobs is there and valid; one dropped, or left invalid by a build "
        "that stopped, is built again (by one node at a time).",
    )

    # Faktory's wire protocol (FWP), served by the same process beside HTTP.
    faktory_port: int = Field(
        7419, ge=0, le=65535, description="TCP port for Faktory clients (FWP); 0 disables it."
    )
    faktory_host: str | None = Field(None, description="Address for FWP; default: the HTTP host.")
    faktory_password: str | None = Field(
        None, description="Password FWP clients must present (HELLO pwdhash); none = open."
    )
    faktory_max_connections: int = Field(1000, ge=1, description="Open FWP connections at most.")
    faktory_max_line_bytes: int = Field(
        1024 * 1024 + 1024, ge=1024, description="Longest FWP command line (a PUSHB is one line)."
    )
    faktory_handshake_timeout: float = Field(
        10.0, gt=0, description="Seconds a new FWP connection has to finish HELLO."
    )
    faktory_idle_timeout: float = Field(
        300.0, gt=0, description="Seconds an FWP connection may send nothing before it is closed."
    )
    faktory_fetch_wait: float = Field(
        2.0, ge=0, le=30, description="Seconds an FWP FETCH blocks when its queues are empty."
    )

    tokens: list[TokenConfig] = Field(
        default_factory=list,
        description="Bearer tokens with scopes (JSON). None: everything is open, loopback only.",
    )
    insecure: bool = Field(False, description="Allow a non-loopback bind without tokens.")
    metrics_public: bool = Field(
        False, description="Serve /metrics without a token (else a metrics or admin token)."
    )
    session_max_age: int = Field(12 * 3600, ge=60, description="Dashboard login lifetime (s).")
    session_secret: SecretStr | None = Field(
        None,
        description="Signs dashboard session cookies (the same on every node); without it a "
        "random key made once and kept in the database signs them.",
    )
    auth_failures_per_minute: int = Field(
        20, ge=1, description="Failed authentications allowed per client address per minute."
    )
    # Host names the server answers to (see werk.api.auth.RequestGuard): the loopback names and
    # the bind host always, these besides; without tokens the check is always on, with tokens
    # only when this is set. "*" turns it off.
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host names (no port) the server answers to besides localhost, 127.0.0.1, "
        "::1 and the bind host; comma-separated; * = any.",
    )

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _host_names(cls, value: Any) -> Any:
        names = value.split(",") if isinstance(value, str) else value
        if not isinstance(names, list):
            return names
        cleaned = [str(n).strip().lower().removeprefix("[").removesuffix("]") for n in names]
        cleaned = [n for n in cleaned if n]
        for name in cleaned:
            if name == "*" or re.fullmatch(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?", name):
                continue
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise ValueError(f"{name!r} is not a host name (give no port)") from None
        return cleaned

    root_path: str = Field(
        "",
        pattern=r"^(/[A-Za-z0-9._~-]+)*$",
        description="Path prefix when served behind a proxy (X-Forwarded-Prefix from a trusted "
        "proxy also works).",
    )

    # Reverse proxies whose X-Forwarded-For, -Proto, -Host and -Prefix headers are believed.
    trusted_proxies: Annotated[list[IPvAnyNetwork], NoDecode] = Field(
        default_factory=list,
        description="Addresses or networks (comma-separated) of the reverse proxies in front; "
        "X-Forwarded-* headers from any other client are ignored. None: ignored from everyone.",
    )

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_proxies(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _pool_sizes(self) -> Settings:
        if self.pool_min_size > self.pool_max_size:
            raise ValueError("pool_min_size must not exceed pool_max_size")
        return self

    @model_validator(mode="after")
    def _pooler_needs_a_database(self) -> Settings:
        if self.database_pooler != "none" and not self.database_url:
            raise ValueError(
                "WERK_DATABASE_POOLER needs WERK_DATABASE_URL (the pooler's address); the "
                "embedded PostgreSQL has no pooler in front"
            )
        if self.direct_database_url and self.database_pooler == "none":
            raise ValueError(
                "WERK_DIRECT_DATABASE_URL is for a pooled WERK_DATABASE_URL: set "
                "WERK_DATABASE_POOLER=transaction, or leave the direct URL out"
            )
        return self

    @property
    def pooled(self) -> bool:
        """WERK_DATABASE_URL leads to a transaction pooler."""
        return self.database_pooler == "transaction"

    @property
    def session_database_url(self) -> str | None:
        """Where a connection can keep session state (LISTEN, a session lock): the database
        itself, or behind a pooler WERK_DIRECT_DATABASE_URL (None when it is not given)."""
        return self.direct_database_url if self.pooled else self.database_url

    @model_validator(mode="after")
    def _search_index_needs_a_session(self) -> Settings:
        if self.search_available and self.pooled and not self.direct_database_url:
            raise ValueError(
                "WERK_SEARCH_AVAILABLE behind a pooler needs WERK_DIRECT_DATABASE_URL: the node "
                "that builds the search index holds a session lock while it builds"
            )
        return self

    @model_validator(mode="after")
    def _public_bind_needs_tokens(self) -> Settings:
        if not self.tokens and not self.insecure and not self.binds_loopback:
            raise ValueError(
                f"refusing to bind {self.host} without authentication: anyone who can reach it "
                f"could push, fetch and delete jobs. Configure tokens ({TOKENS_HELP}), bind "
                "127.0.0.1, or pass --insecure (WERK_INSECURE=1) if something else guards it"
            )
        return self

    @property
    def auth_enabled(self) -> bool:
        return bool(self.tokens)

    @property
    def binds_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False
