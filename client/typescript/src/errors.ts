import type { FieldError } from "./types.js";

/**
 * Base class of every error the client raises: an error answer from the server (problem+json with
 * a stable `code`), or a failure to reach it (`status` undefined). Branch on the class
 * (`instanceof LeaseLost`) or on `code`, never on message text.
 */
export class WerkError extends Error {
  readonly code: string;
  readonly status: number | undefined;
  readonly detail: string;
  readonly errors: FieldError[];
  readonly retryAfter: number | undefined;

  constructor(
    detail: string,
    init: { code?: string; status?: number; errors?: FieldError[]; retryAfter?: number; cause?: unknown } = {},
  ) {
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
 * The request was rejected as malformed (`invalid_request` 422, `invalid_json` and
 * `malformed_request` 400; a graph of jobs refused: `dependency_cycle`, `dependency_not_found`).
 */
export class ValidationError extends WerkError {}
/** No job with that jid (`job_not_found`, 404); completed jobs are deleted at ack. */
export class JobNotFound extends WerkError {}
/** No batch with that bid (`batch_not_found`, 404). */
export class BatchNotFound extends WerkError {}
/** The batch takes no members now (409): `batch_committed` (open it again first) or `batch_finished`. */
export class BatchClosed extends WerkError {}
/** The lease is not the job's current one (`lease_lost`, 409): stop treating the job as yours. */
export class LeaseLost extends WerkError {}
/** Another job holds the pushed job's unique key (`not_unique`, 409); `existingJid` names it. */
export class NotUnique extends WerkError {
  existingJid = "";
}
/**
 * No or a wrong bearer token (`unauthorized`, 401; also `ambiguous_credentials`, and
 * `too_many_auth_failures` 429 from an address that failed too often).
 */
export class Unauthorized extends WerkError {}
/** The token lacks the scope for this call (`forbidden`, 403; also `cross_site_request`). */
export class Forbidden extends WerkError {}
/** The body is larger than the server accepts (`payload_too_large`, 413). */
export class PayloadTooLarge extends WerkError {}
/** An ack's result is over the server's `WERK_MAX_RESULT_BYTES` (`result_too_large`, 413): nothing was acked. */
export class ResultTooLarge extends PayloadTooLarge {}
/** The server (or its database) cannot be reached right now; retrying later may succeed. */
export class Unavailable extends WerkError {}
/** Any other 5xx answer. */
export class ServerError extends WerkError {}

const BY_CODE: Record<string, typeof WerkError> = {
  invalid_request: ValidationError,
  invalid_json: ValidationError,
  malformed_request: ValidationError,
  dependency_cycle: ValidationError,
  dependency_not_found: ValidationError,
  job_not_found: JobNotFound,
  batch_not_found: BatchNotFound,
  batch_committed: BatchClosed,
  batch_finished: BatchClosed,
  lease_lost: LeaseLost,
  not_unique: NotUnique,
  unauthorized: Unauthorized,
  ambiguous_credentials: Unauthorized,
  too_many_auth_failures: Unauthorized,
  forbidden: Forbidden,
  cross_site_request: Forbidden,
  payload_too_large: PayloadTooLarge,
  result_too_large: ResultTooLarge,
  database_unavailable: Unavailable,
  internal_error: ServerError,
};

/** For answers without a code, which did not come from Werk itself (a proxy's, or a wrong base URL's). */
const BY_STATUS: Record<number, typeof WerkError> = {
  400: ValidationError,
  401: Unauthorized,
  403: Forbidden,
  404: JobNotFound,
  409: LeaseLost,
  413: PayloadTooLarge,
  422: ValidationError,
  502: Unavailable,
  503: Unavailable,
  504: Unavailable,
};

/**
 * The typed error for a non-2xx answer: the class by the problem's `code`; a 4xx code this client
 * does not know (a newer server's) is a plain `WerkError` with that code, not guessed from the status.
 */
export function errorFromResponse(status: number, body: unknown, retryAfter?: number): WerkError {
  const problem = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const named = typeof problem.code === "string";
  const code = named ? (problem.code as string) : `http_${status}`;
  const detail = typeof problem.detail === "string" ? problem.detail : typeof body === "string" ? body : "";
  const errors = Array.isArray(problem.errors) ? (problem.errors as FieldError[]) : [];
  let cls = BY_CODE[code];
  if (cls === undefined) {
    cls = named && status < 500 ? WerkError : (BY_STATUS[status] ?? (status >= 500 ? ServerError : WerkError));
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
  readonly seconds: number;
  readonly errtype: string | undefined;

  constructor(seconds: number, message = "", init: { errtype?: string; cause?: unknown } = {}) {
    if (!(seconds >= 0)) throw new RangeError("seconds must be >= 0");
    super(message || `retry in ${seconds}s`, { cause: init.cause });
    this.name = "RetryIn";
    this.seconds = seconds;
    this.errtype = init.errtype;
  }
}

/** Thrown by a handler: fail this attempt and do not retry (the job goes to the dead set). */
export class NoRetry extends Error {
  readonly errtype: string | undefined;

  constructor(message = "", init: { errtype?: string; cause?: unknown } = {}) {
    super(message || "not retried", { cause: init.cause });
    this.name = "NoRetry";
    this.errtype = init.errtype;
  }
}
