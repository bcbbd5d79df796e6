"""The one error tree. Each error has a stable machine ``code``, rendered as problem+json."""

from __future__ import annotations

from typing import Any


class WerkError(Exception):
    code = "internal_error"
    status = 500
    title = "Internal server error"

    def __init__(self, detail: str | None = None, *, errors: list[dict[str, Any]] | None = None):
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.errors = errors

    @property
    def members(self) -> dict[str, Any]:
        """Members of the problem besides the standard ones (RFC 9457 extension members)."""
        return {}


class InvalidRequest(WerkError):
    code = "invalid_request"
    status = 422
    title = "The request is invalid"


class NotUnique(WerkError):
    """Another job holds the pushed job's unique key (on_conflict reject)."""

    code = "not_unique"
    status = 409
    title = "Another job holds this job's unique key"

    def __init__(self, existing_jid: str) -> None:
        super().__init__(f"job {existing_jid} holds this unique key")
        self.existing_jid = existing_jid

    @property
    def members(self) -> dict[str, Any]:
        return {"existing_jid": self.existing_jid}


class JobNotFound(WerkError):
    code = "job_not_found"
    status = 404
    title = "No such job"


class LeaseLost(WerkError):
    code = "lease_lost"
    status = 409
    title = "The lease is not the job's current lease"


class PayloadTooLarge(WerkError):
    code = "payload_too_large"
    status = 413
    title = "The request body is too large"


class UnsupportedMediaType(WerkError):
    code = "unsupported_media_type"
    status = 415
    title = "The body is not JSON"

    def __init__(self) -> None:
        super().__init__("send the body as JSON with Content-Type: application/json")


class ResultTooLarge(WerkError):
    """A job's result is larger than the server stores (WERK_MAX_RESULT_BYTES)."""

    code = "result_too_large"
    status = 413
    title = "The job's result is too large"


class MalformedRequest(WerkError):
    """What the HTTP parser refuses before any route sees it: a bad request line, header or
    chunk, or a head longer than the parser reads."""

    code = "malformed_request"
    status = 400
    title = "The request is not valid HTTP/1.1"


class HeaderTooLarge(WerkError):
    code = "header_too_large"
    status = 431
    title = "The request head is too large"


class RequestTimeout(WerkError):
    """The client stopped sending a request part-way; answered by the HTTP layer, which then
    closes the connection."""

    code = "request_timeout"
    status = 408
    title = "The request did not arrive in time"


class DatabaseUnavailable(WerkError):
    code = "database_unavailable"
    status = 503
    title = "The database is unavailable"


class SchemaTooNew(WerkError):
    """The database was migrated by a newer Werk; running older code against it could corrupt it."""

    code = "schema_too_new"
    status = 500
    title = "The database schema is newer than this server"


class Unauthorized(WerkError):
    code = "unauthorized"
    status = 401
    title = "A valid bearer token is required"


class Forbidden(WerkError):
    code = "forbidden"
    status = 403
    title = "The token lacks the scope this request needs"


class TooManyAuthFailures(WerkError):
    code = "too_many_auth_failures"
    status = 429
    title = "Too many failed authentication attempts"


class AmbiguousCredentials(Unauthorized):
    """More than one Authorization header: parts of a stack may read different ones."""

    code = "ambiguous_credentials"
    title = "More than one Authorization header"


class CrossSiteRequest(Forbidden):
    """Without tokens nothing else tells a web page's request from the operator's own."""

    code = "cross_site_request"
    title = "A cross-site request may not change anything"


class HostNotAllowed(WerkError):
    """A Host this server is not known by: a DNS-rebinding page would send its own name."""

    code = "host_not_allowed"
    status = 421
    title = "The server does not answer to this host name"


class JobStateConflict(WerkError):
    """The operator action does not apply to the job's current state (e.g. retrying an active
    job)."""

    code = "job_state_conflict"
    status = 409
    title = "The action does not apply to the job in its current state"


class WorkerNotFound(WerkError):
    code = "worker_not_found"
    status = 404
    title = "No such worker"


class DependencyNotFound(WerkError):
    """A depends_on names neither an item of the batch nor a stored job."""

    code = "dependency_not_found"
    status = 422
    title = "A dependency is neither in the batch nor stored"


class DependencyCycle(WerkError):
    """The jobs of a batch depend on each other in a cycle: none could ever run."""

    code = "dependency_cycle"
    status = 422
    title = "The dependencies form a cycle"


class BatchNotFound(WerkError):
    code = "batch_not_found"
    status = 404
    title = "No such batch"


class BatchCommitted(WerkError):
    """Jobs and child batches join a batch only while it is open (before its commit, or after
    it is opened again)."""

    code = "batch_committed"
    status = 409
    title = "The batch is committed: open it again to add members"


class BatchFinished(WerkError):
    """A batch that finished (committed with every member settled) is never opened again."""

    code = "batch_finished"
    status = 409
    title = "The batch has finished"
