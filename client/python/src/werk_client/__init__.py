"""Python SDK for Werk: push jobs (``Client``, ``AsyncClient``) and run them (``Worker``).

from werk_client import Client
Client().push("send_email", ["ada@example.com"])

from werk_client import Registry
registry = Registry()

@registry.handler("send_email")
def send_email(address): ...

$ werk-worker --queues default --concurrency 20 myapp.jobs
"""

from .admin import BatchPage, BulkResult, HistoryDay, JobPage, QueueDetail, WorkerInfo
from .async_client import AsyncClient
from .batch import AsyncBatch, Batch
from .client import Client
from .control import NoRetry, RetryIn
from .errors import (
    BatchClosed,
    BatchNotFound,
    Forbidden,
    JobNotFound,
    LeaseLost,
    NotUnique,
    PayloadTooLarge,
    ResultTooLarge,
    ServerError,
    Unauthorized,
    Unavailable,
    ValidationError,
    WerkError,
)
from .flow import Flow
from .job import Job
from .models import (
    AckManyResult,
    BatchCallback,
    BatchStatus,
    Dependencies,
    Dependency,
    Dependent,
    ExtendResult,
    FailResult,
    Failure,
    JobRecord,
    JobResult,
    JobSpec,
    Needs,
    PushJidsResult,
    PushManyResult,
    QueueInfo,
    ServerInfo,
    ServerStatus,
    Totals,
    Unique,
    UniqueConflict,
    WorkerState,
    new_jid,
)
from .registry import Handler, Hook, Middleware, Registry
from .retry import RetryPolicy
from .transactional import transactional_ack, transactional_ack_async
from .version import __version__
from .worker import Worker
from .worker_config import WorkerConfig

__all__ = [
    "AckManyResult",
    "AsyncBatch",
    "AsyncClient",
    "Batch",
    "BatchCallback",
    "BatchClosed",
    "BatchNotFound",
    "BatchPage",
    "BatchStatus",
    "BulkResult",
    "Client",
    "Dependencies",
    "Dependency",
    "Dependent",
    "ExtendResult",
    "FailResult",
    "Failure",
    "Flow",
    "Forbidden",
    "Handler",
    "HistoryDay",
    "Hook",
    "Job",
    "JobNotFound",
    "JobPage",
    "JobRecord",
    "JobResult",
    "JobSpec",
    "LeaseLost",
    "Middleware",
    "Needs",
    "NoRetry",
    "NotUnique",
    "PayloadTooLarge",
    "PushJidsResult",
    "PushManyResult",
    "QueueDetail",
    "QueueInfo",
    "Registry",
    "ResultTooLarge",
    "RetryIn",
    "RetryPolicy",
    "ServerError",
    "ServerInfo",
    "ServerStatus",
    "Totals",
    "Unauthorized",
    "Unavailable",
    "Unique",
    "UniqueConflict",
    "ValidationError",
    "WerkError",
    "Worker",
    "WorkerConfig",
    "WorkerInfo",
    "WorkerState",
    "__version__",
    "new_jid",
    "transactional_ack",
    "transactional_ack_async",
]
