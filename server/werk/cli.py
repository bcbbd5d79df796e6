"""The ``werk`` command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from werk import __version__
from werk.config import Settings
from werk.errors import SchemaTooNew


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="werk", description="Werk background-job server")
    parser.add_argument("--version", action="version", version=f"werk {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the server (embedded PostgreSQL unless a URL is set)")
    serve.add_argument("--host", help="address to bind (WERK_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="HTTP port (WERK_PORT, default 7420)")
    serve.add_argument("--database-url", help="PostgreSQL URL (WERK_DATABASE_URL)")
    serve.add_argument("--data-dir", type=Path, help="embedded PostgreSQL data (WERK_DATA_DIR)")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--workers", type=int, help="HTTP worker processes (WERK_WORKERS)")
    serve.add_argument(
        "--faktory-port", type=int, help="Faktory protocol port, 0 = off (WERK_FAKTORY_PORT, 7419)"
    )
    serve.add_argument(
        "--search-available",
        action="store_const",
        const=True,
        help="keep a words index over available jobs too, built in the background by one node: "
        "a search (q) finds them fast, each push pays for its words (WERK_SEARCH_AVAILABLE); "
        "off again, the index stays until `werk search-index --drop`",
    )
    serve.add_argument(
        "--insecure",
        action="store_const",
        const=True,
        help="allow binding a non-loopback address without tokens (WERK_INSECURE)",
    )

    token = sub.add_parser("token", help="generate a bearer token and its WERK_TOKENS entry")
    token.add_argument("--name", required=True, help="a name for the token (shown in logs)")
    token.add_argument(
        "--scope",
        action="append",
        choices=["push", "work", "admin", "metrics"],
        required=True,
        help="repeat for several scopes",
    )

    index = sub.add_parser(
        "search-index",
        help="build the words index over available jobs now, in the foreground (what "
        "WERK_SEARCH_AVAILABLE has a node do after start-up), or --drop it",
    )
    index.add_argument("--database-url", help="PostgreSQL URL (WERK_DATABASE_URL)")
    index.add_argument("--data-dir", type=Path, help="embedded PostgreSQL data (WERK_DATA_DIR)")
    index.add_argument(
        "--drop",
        action="store_true",
        help="remove it (turn WERK_SEARCH_AVAILABLE off on every node first, or the nodes "
        "still running with it build it again)",
    )

    openapi = sub.add_parser("openapi", help="print the OpenAPI document")
    openapi.add_argument("--output", type=Path, help="write to this file instead of stdout")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {
        key: value
        for key, value in vars(args).items()
        if key in Settings.model_fields and value is not None
    }
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        sys.exit(f"werk: invalid configuration:\n{exc}")


def _database(settings: Settings) -> Settings:
    """The settings with a database URL: the embedded PostgreSQL's, started (or attached to)
    when none is configured; the schema brought up to date."""
    from werk.app import prepare_database

    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if settings.database_url is None:
        from werk.embedded import embedded_url, start_embedded

        embedded = start_embedded(settings.data_dir)
        settings = settings.model_copy(update={"database_url": embedded_url(embedded)})
        # Child processes (--workers) find the same database through the environment.
        os.environ["WERK_DATABASE_URL"] = settings.database_url or ""
    assert settings.database_url is not None
    try:
        asyncio.run(prepare_database(settings.database_url, pooled=settings.pooled))
    except SchemaTooNew as exc:
        sys.exit(f"werk: {exc.detail}")
    except OSError as exc:
        sys.exit(f"werk: cannot reach the database: {exc}")
    return settings


def _serve(settings: Settings) -> None:
    from werk.server import serve

    serve(_database(settings))


def _search_index(settings: Settings, drop: bool) -> None:
    from werk.db.pool import connect
    from werk.services import search_index

    settings = _database(settings)
    dsn = settings.session_database_url
    if dsn is None:
        sys.exit("werk: behind a pooler this needs WERK_DIRECT_DATABASE_URL (a session lock)")

    async def run() -> str:
        conn = await connect(dsn)
        try:
            if drop:
                return await search_index.drop(conn)
            return await search_index.ensure(conn)
        finally:
            await conn.close()

    done = asyncio.run(run())
    if done == "busy":
        sys.exit(f"werk: another node is building {search_index.INDEX}; run this again later")
    sys.stdout.write(f"{search_index.INDEX}: {done}\n")


def _openapi(output: Path | None) -> None:
    from werk.openapi import render

    text = render()
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)


def _token(name: str, scopes: list[str]) -> None:
    import hashlib
    import json
    import secrets

    token = secrets.token_urlsafe(32)
    entry = {
        "name": name,
        "sha256": hashlib.sha256(token.encode()).hexdigest(),
        "scopes": sorted(set(scopes)),
    }
    sys.stdout.write(
        f"token (give it to the client; it is not stored anywhere): {token}\n"
        f"WERK_TOKENS entry (the server keeps only the hash): {json.dumps(entry)}\n"
    )


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        _serve(_settings(args))
    elif args.command == "search-index":
        _search_index(_settings(args), args.drop)
    elif args.command == "openapi":
        _openapi(args.output)
    elif args.command == "token":
        _token(args.name, args.scope)


if __name__ == "__main__":
    main()
