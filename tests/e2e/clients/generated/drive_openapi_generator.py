"""Drives a Python client made from openapi/openapi.json by OpenAPI Generator's `python`
generator: push, batch push, fetch, ack, fail, extend, get, info, and typed 409/422 errors. Run
by tests/e2e/clients/test_generated.py as
`python drive_openapi_generator.py <dir holding the generated package werk_oag> <server url>`."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable

sys.path.insert(0, sys.argv[1])

from werk_oag import ApiClient, Configuration, JobsApi, SystemApi, WorkApi
from werk_oag.exceptions import ApiException
from werk_oag.models import (
    Ack,
    Extend,
    FailReport,
    Fetch,
    FetchedJob,
    Job,
    JobBatchPush,
    JobPush,
    Problem,
    PushedJob,
)

api = ApiClient(Configuration(host=sys.argv[2]))
jobs, work, system = JobsApi(api), WorkApi(api), SystemApi(api)
queue = f"gen-oag-{uuid.uuid4().hex[:8]}"


def problem(call: Callable[[], object], status: int, code: str) -> Problem:
    """The typed error body of a refused call."""
    try:
        call()
    except ApiException as exc:
        assert exc.status == status, exc
        assert isinstance(exc.data, Problem) and exc.data.code == code, exc
        return exc.data
    raise AssertionError(f"expected {status} {code}")


# Unset optional fields set to None explicitly: this generator then sends them as null.
body = JobPush(jobtype="gen", args=[1, "a"], queue=queue, priority=None, retry=None)
pushed = jobs.jobs_push_with_http_info(body)
assert pushed.status_code == 201 and isinstance(pushed.data, PushedJob), pushed
assert pushed.data.created is True and pushed.data.retry == 25, pushed.data
again = jobs.jobs_push(JobPush(jobtype="gen", jid=pushed.data.jid, queue=queue))
assert again.created is False and again.jid == pushed.data.jid, again

batch = jobs.jobs_push_batch(
    JobBatchPush(
        jobs=[JobPush(jobtype="gen", args=[2], queue=queue), JobPush(jobtype="gen", queue=queue)]
    )
)
assert batch.created == 2 and batch.existed == [] and len(batch.jobs or []) == 2, batch
minimal = jobs.jobs_push_batch(
    JobBatchPush(jobs=[JobPush(jobtype="gen", jid=pushed.data.jid, queue=queue)]),
    prefer="return=minimal",
)
assert minimal.existed == [pushed.data.jid] and minimal.jobs is None, minimal

fetched = work.work_fetch(Fetch(queues=[queue], wid="gen-oag", count=3, wait=None))
assert len(fetched.jobs) == 3 and all(isinstance(j, FetchedJob) for j in fetched.jobs), fetched
first, second, _ = fetched.jobs
assert first.state == "active" and first.lease

acked = work.work_ack_with_http_info(first.jid, Ack(lease=first.lease))
assert acked.status_code == 204, acked
problem(lambda: work.work_ack(second.jid, Ack(lease="not-the-lease")), 409, "lease_lost")

extended = work.work_extend(second.jid, Extend(lease=second.lease, progress={"step": 1}))
assert extended.jid == second.jid and extended.lease_expires_at, extended
failed = work.work_fail(
    second.jid,
    FailReport(lease=second.lease, errtype="GeneratedError", message="from a generated client"),
)
assert failed.state == "scheduled", failed
job = jobs.jobs_get(second.jid)
assert isinstance(job, Job) and job.failure and job.failure.errtype == "GeneratedError", job
assert job.progress == {"step": 1}, job

info = system.system_info()
assert info.totals.processed >= 1, info

# The models check the schema's patterns before sending: construct one unchecked, so the
# server's answer is what is tested.
bad = JobPush.model_construct(jobtype="gen", queue="bad queue")
invalid = problem(lambda: jobs.jobs_push(bad), 422, "invalid_request")
assert invalid.errors and invalid.errors[0].loc == "queue", invalid
problem(lambda: jobs.jobs_get("no-such-job-anywhere"), 404, "job_not_found")
print("openapi-generator python client: ok")
