/**
 * Base class of every error the client raises: an error answer from the server (problem+json with
 * a stable `code`), or a failure to reach it (`status` undefined). Branch on the class
 * (`instanceof LeaseLost`) or on `code`, never on message text.
 */
export class WerkError extends Error {
    code;
    status;
    detail;
    errors;
    retryAfter;
    constructor(detail, init = {}) {
        const code = init.code ?? "error";
        const head = init.status === undefined ? code : `${init.status} ${code}`;
        const fields = (init.errors ?? []).map((e) => `${e.loc}: ${e.message}`).join("; ");
        super(`${head}${detail ? `: ${detail}` : ""}${fields ? ` (${fields})` : ""}`, { cause: init.cause });
        this.name = new.target.name;
        this.code = code;
        this.status = init.status;
        this.detail = detail;
        this.errors = init.errors ?? [];
        this.retryAfter = init.retryAfter;
    }
}
/**
 * The request was rejected as malformed (`invalid_request` 422, `invalid_json` 400; a graph of
 * jobs refused: `dependency_cycle`, `dependency_not_found`).
 */
export class ValidationError extends WerkError {
}
/** No job with that jid (`job_not_found`, 404); completed jobs are deleted at ack. */
export class JobNotFound extends WerkError {
}
/** No batch with that bid (`batch_not_found`, 404). */
export class BatchNotFound extends WerkError {
}
/** The batch takes no members now (409): `batch_committed` (open it again first) or `batch_finished`. */
export class BatchClosed extends WerkError {
}
/** The lease is not the job's current one (`lease_lost`, 409): stop treating the job as yours. */
export class LeaseLost extends WerkError {
}
/** Another job holds the pushed job's unique key (`not_unique`, 409); `existingJid` names it. */
export class NotUnique extends WerkError {
    existingJid = "";
}
/** No or a wrong bearer token (401). */
export class Unauthorized extends WerkError {
}
/** The token lacks the scope for this call (403). */
export class Forbidden extends WerkError {
}
/** The body is larger than the server accepts (413). */
export class PayloadTooLarge extends WerkError {
}
/** The server (or its database) cannot be reached right now; retrying later may succeed. */
export class Unavailable extends WerkError {
}
/** Any other 5xx answer. */
export class ServerError extends WerkError {
}
const BY_CODE = {
    invalid_request: ValidationError,
    invalid_json: ValidationError,
    dependency_cycle: ValidationError,
    dependency_not_found: ValidationError,
    job_not_found: JobNotFound,
    batch_not_found: BatchNotFound,
    batch_committed: BatchClosed,
    batch_finished: BatchClosed,
    lease_lost: LeaseLost,
    not_unique: NotUnique,
    unauthorized: Unauthorized,
    forbidden: Forbidden,
    payload_too_large: PayloadTooLarge,
    database_unavailable: Unavailable,
};
/** The typed error for a non-2xx answer (codes this client does not know become `WerkError`). */
export function errorFromResponse(status, body, retryAfter) {
    const problem = (typeof body === "object" && body !== null ? body : {});
    const code = typeof problem.code === "string" ? problem.code : `http_${status}`;
    const detail = typeof problem.detail === "string" ? problem.detail : typeof body === "string" ? body : "";
    const errors = Array.isArray(problem.errors) ? problem.errors : [];
    let cls = BY_CODE[code];
    if (cls === undefined) {
        cls = status === 502 || status === 503 || status === 504 ? Unavailable : status >= 500 ? ServerError : WerkError;
    }
    const error = new cls(detail, { code, status, errors, retryAfter });
    if (error instanceof NotUnique && typeof problem.existing_jid === "string") {
        error.existingJid = problem.existing_jid;
    }
    return error;
}
/**
 * Thrown by a handler: fail this attempt and retry after `seconds` (0: as soon as possible),
 * whatever the backoff schedule says (rate limits, a dependency that says "come back later").
 * With `cause`, the failure records the cause's type and message.
 */
export class RetryIn extends Error {
    seconds;
    errtype;
    constructor(seconds, message = "", init = {}) {
        if (!(seconds >= 0))
            throw new RangeError("seconds must be >= 0");
        super(message || `retry in ${seconds}s`, { cause: init.cause });
        this.name = "RetryIn";
        this.seconds = seconds;
        this.errtype = init.errtype;
    }
}
/** Thrown by a handler: fail this attempt and do not retry (the job goes to the dead set). */
export class NoRetry extends Error {
    errtype;
    constructor(message = "", init = {}) {
        super(message || "not retried", { cause: init.cause });
        this.name = "NoRetry";
        this.errtype = init.errtype;
    }
}
