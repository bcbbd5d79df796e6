import type { FieldError } from "./types.js";
/**
 * Base class of every error the client raises: an error answer from the server (problem+json with
 * a stable `code`), or a failure to reach it (`status` undefined). Branch on the class
 * (`instanceof LeaseLost`) or on `code`, never on message text.
 */
export declare class WerkError extends Error {
    readonly code: string;
    readonly status: number | undefined;
    readonly detail: string;
    readonly errors: FieldError[];
    readonly retryAfter: number | undefined;
    constructor(detail: string, init?: {
        code?: string;
        status?: number;
        errors?: FieldError[];
        retryAfter?: number;
        cause?: unknown;
    });
}
/**
 * The request was rejected as malformed (`invalid_request` 422, `invalid_json` and
 * `malformed_request` 400; a graph of jobs refused: `dependency_cycle`, `dependency_not_found`).
 */
export declare class ValidationError extends WerkError {
}
/** No job with that jid (`job_not_found`, 404); completed jobs are deleted at ack. */
export declare class JobNotFound extends WerkError {
}
/** No batch with that bid (`batch_not_found`, 404). */
export declare class BatchNotFound extends WerkError {
}
/** The batch takes no members now (409): `batch_committed` (open it again first) or `batch_finished`. */
export declare class BatchClosed extends WerkError {
}
/** The lease is not the job's current one (`lease_lost`, 409): stop treating the job as yours. */
export declare class LeaseLost extends WerkError {
}
/** Another job holds the pushed job's unique key (`not_unique`, 409); `existingJid` names it. */
export declare class NotUnique extends WerkError {
    existingJid: string;
}
/**
 * No or a wrong bearer token (`unauthorized`, 401; also `ambiguous_credentials`, and
 * `too_many_auth_failures` 429 from an address that failed too often).
 */
export declare class Unauthorized extends WerkError {
}
/** The token lacks the scope for this call (`forbidden`, 403; also `cross_site_request`). */
export declare class Forbidden extends WerkError {
}
/** The body is larger than the server accepts (`payload_too_large`, 413). */
export declare class PayloadTooLarge extends WerkError {
}
/** An ack's result is over the server's `WERK_MAX_RESULT_BYTES` (`result_too_large`, 413): nothing was acked. */
export declare class ResultTooLarge extends PayloadTooLarge {
}
/** The server (or its database) cannot be reached right now; retrying later may succeed. */
export declare class Unavailable extends WerkError {
}
/** Any other 5xx answer. */
export declare class ServerError extends WerkError {
}
/**
 * The typed error for a non-2xx answer: the class by the problem's `code`; a 4xx code this client
 * does not know (a newer server's) is a plain `WerkError` with that code, not guessed from the status.
 */
export declare function errorFromResponse(status: number, body: unknown, retryAfter?: number): WerkError;
/**
 * Thrown by a handler: fail this attempt and retry after `seconds` (0: as soon as possible),
 * whatever the backoff schedule says (rate limits, a dependency that says "come back later").
 * With `cause`, the failure records the cause's type and message.
 */
export declare class RetryIn extends Error {
    readonly seconds: number;
    readonly errtype: string | undefined;
    constructor(seconds: number, message?: string, init?: {
        errtype?: string;
        cause?: unknown;
    });
}
/** Thrown by a handler: fail this attempt and do not retry (the job goes to the dead set). */
export declare class NoRetry extends Error {
    readonly errtype: string | undefined;
    constructor(message?: string, init?: {
        errtype?: string;
        cause?: unknown;
    });
}
