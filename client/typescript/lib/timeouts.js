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
export const TIMEOUT_ERRTYPE = "Timeout";
/** The server's default reservation, and the longest one it accepts (seconds). */
export const RESERVE_FOR_DEFAULT = 1800;
export const RESERVE_FOR_MAX = 86_400;
/** `timeout` in seconds; throws a RangeError unless positive and within `reserveFor`. */
export function checkTimeout(timeout, reserveFor, where) {
    const cover = reserveFor ?? RESERVE_FOR_DEFAULT;
    if (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout <= 0) {
        throw new RangeError(`${where}: timeout must be a positive number of seconds, not ${JSON.stringify(timeout)}`);
    }
    if (timeout > cover) {
        throw new RangeError(`${where}: timeout ${timeout}s is longer than the job's reserve_for (${cover}s), which must cover it; ` +
            "raise reserve_for or lower the timeout");
    }
    return timeout;
}
/** The per-job timeout in `custom` (undefined: not set). */
export function customTimeout(custom) {
    if (custom === null || typeof custom !== "object")
        return undefined;
    return custom.timeout ?? undefined;
}
/** The error a timed-out handler's signal is aborted with, and its attempt is failed with. */
export class TimeoutError extends Error {
    constructor(seconds) {
        super(`the handler ran past its timeout of ${seconds}s`);
        this.name = TIMEOUT_ERRTYPE;
    }
}
/**
 * `queues` drawn one by one without replacement, each with probability proportional to its weight
 * (default 1): key `u ** (1 / w)`, largest first (Efraimidis and Spirakis), as Sidekiq orders
 * weighted queues on every fetch.
 */
export function weightedOrder(queues, weights) {
    const keys = new Map(queues.map((q) => [q, Math.random() ** (1 / (weights[q] ?? 1))]));
    return [...queues].sort((a, b) => keys.get(b) - keys.get(a));
}
