"""The public surface of werk_client is deliberate: changing it must show up in review."""

from __future__ import annotations

import werk_client


def test_all_is_pinned():
    assert sorted(werk_client.__all__) == [
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
    for name in werk_client.__all__:
        assert hasattr(werk_client, name), name


def test_errors_form_one_tree():
    for name in (
        "BatchClosed",
        "BatchNotFound",
        "Forbidden",
        "JobNotFound",
        "LeaseLost",
        "PayloadTooLarge",
        "ServerError",
        "Unauthorized",
        "Unavailable",
        "ValidationError",
    ):
        assert issubclass(getattr(werk_client, name), werk_client.WerkError)


def test_the_sdk_does_not_depend_on_the_server():
    import subprocess
    import sys

    code = (
        "import sys, werk_client, werk_client.worker_cli;"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('werk', 'fastapi', 'asyncpg', 'pydantic', 'starlette')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
