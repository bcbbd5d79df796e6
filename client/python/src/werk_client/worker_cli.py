"""``werk-worker``: run a worker for the handlers of an importable module.

    werk-worker --queues critical,default --concurrency 20 myapp.jobs

The module must expose its handlers as a ``werk_client.Registry`` (or a plain mapping of
jobtype to function) named ``registry`` or ``handlers``; ``myapp.jobs:my_registry`` names
another attribute. The current directory is importable, as with ``python -m``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from .logs import configure_logging
from .registry import Registry
from .worker import Worker
from .worker_config import WorkerConfig

__all__ = ["load_registry", "main"]

_DEFAULT_ATTRS = ("registry", "handlers")


def _as_registry(value: Any, where: str) -> Registry:
    if isinstance(value, Registry):
        return value
    if isinstance(value, Mapping):
        return Registry(value)
    raise SystemExit(f"werk-worker: {where} is neither a werk_client.Registry nor a mapping")


def load_registry(target: str) -> tuple[Registry, str]:
    """Import ``module[:attr]`` and return its registry and the module name."""
    module_name, _, attr = target.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"werk-worker: cannot import {module_name!r}: {exc}") from exc
    if attr:
        if not hasattr(module, attr):
            raise SystemExit(f"werk-worker: module {module_name!r} has no attribute {attr!r}")
        return _as_registry(getattr(module, attr), target), module_name
    for name in _DEFAULT_ATTRS:
        if hasattr(module, name):
            return _as_registry(getattr(module, name), f"{module_name}:{name}"), module_name
    found = [v for v in vars(module).values() if isinstance(v, Registry)]
    if len(found) == 1:
        return found[0], module_name
    raise SystemExit(
        f"werk-worker: {module_name!r} exposes no `registry` (a werk_client.Registry); "
        f"name one with {module_name}:ATTRIBUTE"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="werk-worker",
        description="Run Werk jobs with the handlers registered in MODULE.",
    )
    parser.add_argument("module", help="module exposing a Registry: myapp.jobs or myapp.jobs:attr")
    parser.add_argument("--url", help="server URL (default: $WERK_URL or http://127.0.0.1:7420)")
    parser.add_argument("--token", help="bearer token (default: $WERK_TOKEN)")
    parser.add_argument("-q", "--queues", help="comma-separated queues, in priority order")
    parser.add_argument("-c", "--concurrency", type=int, help="jobs run at once (default 10)")
    parser.add_argument(
        "--process", action="store_true", default=None, help="run each job in a child process"
    )
    parser.add_argument("--grace", type=float, help="seconds to finish jobs after SIGTERM (25)")
    parser.add_argument("--beat-interval", type=float, help="seconds between heartbeats (15)")
    parser.add_argument("--fetch-wait", type=float, help="long-poll seconds per fetch (25)")
    parser.add_argument("--fetch-size", type=int, help="most jobs per fetch, 1..100 (100)")
    parser.add_argument(
        "--extend-fraction", type=float, help="extend leases after this share of reserve_for"
    )
    parser.add_argument("--label", action="append", dest="labels", help="worker label (repeat)")
    parser.add_argument("--wid", help="worker id (default: random)")
    parser.add_argument(
        "--no-batch-ack",
        action="store_false",
        dest="batch_ack",
        default=None,
        help="ack each job with its own request",
    )
    parser.add_argument("--log-level", default=os.environ.get("WERK_LOG_LEVEL", "INFO"))
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=os.environ.get("WERK_LOG_FORMAT", "text"),
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    registry, module_name = load_registry(args.module)
    if len(registry) == 0:
        raise SystemExit(f"werk-worker: {args.module} registers no handlers")
    try:
        config = WorkerConfig.from_env(
            queues=args.queues,
            concurrency=args.concurrency,
            process=args.process,
            grace=args.grace,
            beat_interval=args.beat_interval,
            fetch_wait=args.fetch_wait,
            fetch_size=args.fetch_size,
            extend_fraction=args.extend_fraction,
            labels=args.labels,
            batch_ack=args.batch_ack,
        )
    except ValueError as exc:
        raise SystemExit(f"werk-worker: {exc}") from exc
    worker = Worker(
        registry,
        url=args.url,
        token=args.token,
        config=config,
        wid=args.wid,
        preload=[module_name],
    )
    logging.getLogger("werk_client.worker").debug("worker id %s", worker.wid)
    worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
