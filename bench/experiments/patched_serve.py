"""`werk serve` with the server changes proposed in bench/README.md applied as monkeypatches,
to measure their effect before the server code changes. Single process only (--workers 1):
uvicorn's spawned children would not inherit the patches.

    python bench/experiments/patched_serve.py [--patch reset,deps] serve --port P --database-url URL

Patches:
  reset  asyncpg pool releases a connection without the reset query (`SELECT
         pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL;` -- one extra round trip
         and four statements per pooled query; werk keeps no session state on pooled
         connections, so there is nothing to reset)
  deps   the FastAPI dependencies werk.api.deps._services/_settings become `async def`, so
         FastAPI stops running them in the anyio thread pool (two thread hops per request)
"""

from __future__ import annotations

import sys

from fastapi import Request  # module level: FastAPI resolves the dependencies' annotations here


def _apply(patches: set[str]) -> None:
    if "reset" in patches:
        import asyncpg

        original = asyncpg.create_pool

        async def _no_reset(_conn: object) -> None:
            return None

        def create_pool(*args: object, **kwargs: object) -> object:
            kwargs.setdefault("reset", _no_reset)
            return original(*args, **kwargs)

        asyncpg.create_pool = create_pool  # type: ignore[assignment]

    if "deps" in patches:
        from werk.api import deps

        async def _services(request: Request) -> object:
            return request.app.state.services

        async def _settings(request: Request) -> object:
            return request.app.state.settings

        object.__setattr__(deps.ServicesDep.__metadata__[0], "dependency", _services)
        object.__setattr__(deps.SettingsDep.__metadata__[0], "dependency", _settings)


def main() -> None:
    argv = sys.argv[1:]
    patches = {"reset", "deps"}
    if argv[:1] == ["--patch"]:
        patches = {p for p in argv[1].split(",") if p}
        argv = argv[2:]
    _apply(patches)
    from werk.cli import main as werk_main

    werk_main(argv)


if __name__ == "__main__":
    main()
