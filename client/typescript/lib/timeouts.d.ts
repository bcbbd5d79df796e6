/**
 * Per-job execution timeouts: how long one attempt's handler may run on a worker, separate from
 * the server's `reserve_for` (how long a lease lasts between extensions, which the worker keeps
 * extending). At the timeout the handler's `signal` is aborted (reason: a `TimeoutError`); after
 * the worker's `timeoutGraceMs` the attempt is failed with errtype `Timeout` whether the handler
 * stopped or not, and its slot serves the next job.
 *
 * A timeout comes from `register(jobtype, handler, { timeout })` or, per job, from
 * `custom.timeout` (seconds), which wins. One the job's reservation cannot cover is refused
 * where it is set: a lease that ran out before the handler is even asked to stop would hand the
 * job to another worker while this one still runs it.
 */
export declare const TIMEOUT_ERRTYPE = "Timeout";
/** The server's default reservation, and the longest one it accepts (seconds). */
export declare const RESERVE_FOR_DEFAULT = 1800;
export declare const RESERVE_FOR_MAX = 86400;
/** `timeout` in seconds; throws a RangeError unless positive and within `reserveFor`. */
export declare function checkTimeout(timeout: unknown, reserveFor: number | undefined, where: string): number;
/** The per-job timeout in `custom` (undefined: not set). */
export declare function customTimeout(custom: unknown): unknown;
/** The error a timed-out handler's signal is aborted with, and its attempt is failed with. */
export declare class TimeoutError extends Error {
    constructor(seconds: number);
}
/**
 * `queues` drawn one by one without replacement, each with probability proportional to its weight
 * (default 1): key `u ** (1 / w)`, largest first (Efraimidis and Spirakis), as Sidekiq orders
 * weighted queues on every fetch.
 */
export declare function weightedOrder(queues: string[], weights: Record<string, number>): string[];
