"""The services one server process runs, built and torn down by the app's lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from werk.services.admin import AdminService
from werk.services.batches import BatchService
from werk.services.claim import ClaimService
from werk.services.info import InfoService
from werk.services.maintenance import Maintenance
from werk.services.metrics import MetricsService
from werk.services.push import PushService
from werk.services.queues import QueueService
from werk.services.results import ResultService
from werk.services.sessions import SessionService
from werk.services.settle import SettleService
from werk.services.wakeup import WakeHub
from werk.services.workers import WorkerService


@dataclass(slots=True)
class Services:
    push: PushService
    claim: ClaimService
    settle: SettleService
    results: ResultService
    workers: WorkerService
    info: InfoService
    hub: WakeHub
    maintenance: Maintenance
    queues: QueueService
    admin: AdminService
    metrics: MetricsService
    sessions: SessionService
    batches: BatchService
