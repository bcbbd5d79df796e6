"""create_app(settings) -> FastAPI. Nothing is built at import time; the lifespan owns the pool
and the background services of this process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import get_args

from fastapi import Depends, FastAPI

from werk import __version__, web
from werk.api import (
    admin_routes,
    auth,
    batches_routes,
    jobs_routes,
    metrics_routes,
    problems,
    system_routes,
    traffic,
    work_routes,
)
from werk.api.auth import RequestGuard, authorize
from werk.api.limits import BodyLimit
from werk.api.traffic import TrafficRouter
from werk.config import Scope, Settings
from werk.db import queries
from werk.db.failures import CONNECTION_ERRORS
from werk.db.listener import APPLICATION_NAME, Listener
from werk.db.migrate import migrate
from werk.db.pool import connect, create_pool
from werk.domain.clock import Clock, DatabaseClock
from werk.faktory.server import FaktoryServer
from werk.http.head import HeadAsGet
from werk.http.proxies import TrustedProxies
from werk.services.admin import AdminService
from werk.services.batches import BatchService
from werk.services.claim import ClaimService
from werk.services.container import Services
from werk.services.dependency_reads import AnswerBudget
from werk.services.faktory_ops import FaktoryOps
from werk.services.info import InfoService
from werk.services.maintenance import Maintenance
from werk.services.metrics import MetricsService, RequestDurations
from werk.services.push import PushService
from werk.services.queues import QueueService
from werk.services.results import ResultService
from werk.services.search_index import SearchIndexBuild
from werk.services.sessions import SessionService
from werk.services.settle import SettleService
from werk.services.wakeup import WakeHub
from werk.services.workers import WorkerService

log = logging.getLogger(__name__)


async def prepare_database(dsn: str, *, pooled: bool = False) -> None:
    """Apply migrations (under an advisory lock, so concurrent starts are safe). ``pooled``:
    ``dsn`` leads to a transaction pooler."""
    conn = await connect(dsn, pooled=pooled)
    try:
        await migrate(conn)
    finally:
        await conn.close()


def create_app(
    settings: Settings, *, clock: Clock | None = None, background: bool = True
) -> FastAPI:
    """``background=False`` leaves out the maintenance loop, for tests that drive it by hand."""
    if not settings.database_url:
        raise ValueError(
            "create_app needs settings.database_url (the CLI starts the embedded "
            "PostgreSQL and fills it in)"
        )
    dsn = settings.database_url
    clock = clock or DatabaseClock()
    durations = RequestDurations()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pooled = settings.pooled
        await prepare_database(dsn, pooled=pooled)
        # Two pools. The job traffic runs a handful of fixed statements whose plans do not
        # depend on their parameters, so its pool plans each once (generic plans): planning cost
        # more than executing them. Everything else (maintenance, admin, dashboard, metrics)
        # filters on optional parameters and keeps PostgreSQL's per-call planning.
        pool = await create_pool(
            dsn,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            plan_once=True,
            pooled=pooled,
        )
        admin_pool = await create_pool(
            dsn, min_size=1, max_size=settings.admin_pool_max_size, pooled=pooled
        )
        hub = WakeHub(
            send_notify=lambda payload: queries.notify_queues(pool, [payload]),
            queues_with_jobs=lambda qs: queries.queues_with_available(admin_pool, qs),
            count_peers=lambda pid: queries.other_listeners(admin_pool, pid, APPLICATION_NAME),
            poll_interval=settings.poll_interval,
            jobs_settled=lambda jids: queries.jobs_settled(admin_pool, jids),
        )
        # LISTEN is session state: a transaction pooler cannot keep it, so behind one it needs a
        # direct connection, or the process does without (see WakeHub.without_listen).
        listen_dsn = settings.session_database_url
        listener = None
        if listen_dsn:
            listener = Listener(
                listen_dsn,
                hub.on_notification,
                hello=hub.hello,
                on_listening=hub.listening,
                retry_every=settings.poll_interval,
            )
        # Built after start-up (below), so that a build over a backlog does not hold the server's
        # readiness, and again by the upkeep whenever it finds the index missing or invalid.
        search_index = None
        if settings.search_available:
            assert listen_dsn is not None  # Settings requires a direct URL behind a pooler
            search_index = SearchIndexBuild(listen_dsn)
        dependencies = AnswerBudget(
            settings.max_dependency_results_bytes, settings.max_dependencies_listed
        )
        claim = ClaimService(pool, clock, hub, dependencies=dependencies)
        services = Services(
            push=PushService(
                pool,
                clock,
                hub,
                claim,
                dependencies=dependencies,
            ),
            claim=claim,
            settle=SettleService(
                pool,
                clock,
                hub,
                keep_completed=settings.completed_retention > 0,
                max_result_bytes=settings.max_result_bytes,
            ),
            results=ResultService(pool, hub),
            workers=WorkerService(pool, clock),
            info=InfoService(admin_pool, clock),
            hub=hub,
            maintenance=Maintenance(admin_pool, clock, hub, settings, search_index),
            queues=QueueService(admin_pool, clock, hub),
            admin=AdminService(admin_pool, clock, hub),
            metrics=MetricsService(admin_pool, clock, durations),
            sessions=SessionService(admin_pool, clock, settings),
            batches=BatchService(pool, clock),
        )
        app.state.services = services
        hub.start()
        if listener is not None:
            listener.start()
        else:
            hub.without_listen()
        if background:
            services.maintenance.start()
        if search_index is not None:
            search_index.start()
        # Faktory's wire protocol, in this event loop, over the same services.
        faktory = FaktoryServer(
            settings,
            services,
            FaktoryOps(admin_pool, clock, hub),
            unavailable=CONNECTION_ERRORS,
        )
        app.state.faktory = faktory
        try:
            await faktory.start()
            yield
        finally:
            await faktory.close()
            await hub.close()
            await services.maintenance.close()
            if search_index is not None:  # after the upkeep, which may start a build again
                await search_index.close()
            if listener is not None:
                await listener.close()
            for writing in (services.push, services.claim, services.settle):
                await writing.close()
            for closing in (pool, admin_pool):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closing.close(), 10)

    app = FastAPI(
        title="Werk",
        version=__version__,
        summary="Language-agnostic background jobs over HTTP, stored in PostgreSQL.",
        lifespan=lifespan,
        # With tokens, /openapi.json needs one (system_routes.description_router), and the docs
        # pages, which would fetch it without one, are off.
        openapi_url=None if settings.tokens else "/openapi.json",
        # Werk exports its own Prometheus metrics; FastAPI's OpenTelemetry hook would look up
        # the providers (environment reads) on every request for nothing.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    problems.install(app, CONNECTION_ERRORS)
    auth.install(app, settings)
    # Scopes per router: push (reading a job too: push or work), work, admin for the rest;
    # /livez and /readyz stay open; /metrics needs metrics (or admin) unless WERK_METRICS_PUBLIC.
    app.include_router(
        jobs_routes.router, dependencies=[Depends(authorize("push", read=("push", "work")))]
    )
    app.include_router(work_routes.router, dependencies=[Depends(authorize("work"))])
    app.include_router(
        batches_routes.router, dependencies=[Depends(authorize("push", read=("push", "work")))]
    )
    app.include_router(batches_routes.admin_router, dependencies=[Depends(authorize("admin"))])
    app.include_router(
        system_routes.router,
        dependencies=[Depends(authorize("admin", public=("/livez", "/readyz")))],
    )
    auth.document_public(app, ("/livez", "/readyz"))
    if settings.tokens:
        app.include_router(
            system_routes.description_router,
            dependencies=[Depends(authorize("admin", read=get_args(Scope)))],
        )
    app.include_router(admin_routes.router, dependencies=[Depends(authorize("admin"))])
    app.include_router(metrics_routes.router, dependencies=[Depends(authorize("metrics"))])
    web.install(app, settings)  # the dashboard at /: login sessions, admin scope
    traffic_routes = [
        *jobs_routes.TRAFFIC,
        *work_routes.TRAFFIC,
        *batches_routes.TRAFFIC,
        *admin_routes.TRAFFIC,
    ]
    traffic.document(app, traffic_routes)
    # After document_public: it reads `security`.
    problems.document(app, offline=("/livez",), probes=auth.PROBES)
    # Outermost last. The job traffic's router sits in front of FastAPI's (see werk.api.traffic)
    # and bounds and times its own requests as the next two do FastAPI's; in front of both:
    # HEAD taken as GET; the guard's rules (Host, cross-site, one Authorization) and what a
    # trusted proxy forwards.
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(metrics_routes.TimeRequests, durations=durations)
    app.add_middleware(
        TrafficRouter,
        routes=traffic_routes,
        durations=durations,
        max_body_bytes=settings.max_body_bytes,
    )
    app.add_middleware(HeadAsGet)
    app.add_middleware(RequestGuard, settings=settings)
    if settings.trusted_proxies:
        app.add_middleware(TrustedProxies, proxies=settings.trusted_proxies)
    return app


def begin_shutdown(app: FastAPI) -> None:
    """Called when the process is told to stop: waiting long polls answer at once."""
    services: Services | None = getattr(app.state, "services", None)
    if services is not None:
        services.hub.stop_waiting()
