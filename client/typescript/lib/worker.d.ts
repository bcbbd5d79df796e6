import { Client, type ClientOptions } from "./client.js";
import type { FetchedJob, WorkerState } from "./types.js";
/** What a handler gets besides the job's args. */
export interface JobContext {
    /** The job as fetched (jid, attempt, `progress` of an earlier attempt, ...). */
    job: FetchedJob;
    /**
     * Aborted when the lease is lost, the worker is terminating, or the job's timeout passed (the
     * reason is then a `TimeoutError`): stop work, the result is ignored.
     */
    signal: AbortSignal;
    /** Extend the lease now and record a checkpoint the next attempt receives as `job.progress`. */
    checkpoint(progress: unknown): Promise<void>;
}
export type Handler = (args: unknown[], ctx: JobContext) => unknown;
/**
 * Runs around every job: `async (ctx, next) => { ...; const value = await next(); ...; return value; }`.
 * A throw fails the job; not calling `next` skips the handler (the job is acked). The first added
 * is the outermost.
 */
export type Middleware = (ctx: JobContext, next: () => Promise<unknown>) => Promise<unknown>;
/** Run once when the worker starts (before it fetches) or stops (after its jobs were settled). */
export type Hook = () => unknown;
export interface HandlerOptions {
    /** Seconds one attempt may run (a job's `custom.timeout` overrides it); see `timeoutGraceMs`. */
    timeout?: number;
}
export interface WorkerOptions extends ClientOptions {
    /** Handlers by jobtype. More can be added with `register`. */
    handlers?: Record<string, Handler>;
    /** Queues to fetch from, in priority order (default `["default"]`). */
    queues?: string[];
    /**
     * `{ critical: 6, default: 3 }`: every fetch orders `queues` by a weighted random draw (queues
     * not named weigh 1), so no queue starves. Unset: the strict order of `queues`.
     */
    weights?: Record<string, number>;
    /** After a job's timeout, how long its handler may take to stop before it is failed anyway (ms, default 5 000). */
    timeoutGraceMs?: number;
    /** Middleware around every job (more with `use`). */
    middleware?: Middleware[];
    /** Jobs run at once (default 10). */
    concurrency?: number;
    /** Most jobs asked for per fetch (default 100, the server's limit). */
    fetchBatch?: number;
    /** Long-poll seconds per fetch (default 25; the server caps a long poll at 30). */
    fetchWait?: number;
    /** Heartbeat interval in ms (default 15 000). */
    beatIntervalMs?: number;
    /** On stop, how long running jobs may finish before they are failed (ms, default 25 000). */
    shutdownGraceMs?: number;
    /**
     * Seconds after which a job failed at shutdown (errtype `WorkerShutdown`) is retried (default 0:
     * at once, on another worker): it was interrupted rather than broken, so it skips the backoff.
     */
    shutdownRetryIn?: number;
    /** Most stack lines a failure sends (default 50); a job pushed with `backtrace` > 0 sends at most that many. */
    backtraceLines?: number;
    /**
     * Extend a job's lease when this fraction of `reserve_for` has passed (default 1/3, as the Python
     * worker does: a failed extension has two thirds of the lease left to be tried again).
     */
    extendAt?: number;
    /** Process id for the server (default: a new random one). */
    wid?: string;
    labels?: string[];
    /** Stop gracefully on SIGTERM/SIGINT while running (default true). */
    handleSignals?: boolean;
    /** Where the worker reports what it cannot throw (default: console.error). */
    onError?: (error: unknown, job?: FetchedJob) => void;
    /** Use this client instead of building one from `url`/`token`. */
    client?: Client;
    /** Ack completed jobs together, one request per batch (default true); false: one per job. */
    batchAck?: boolean;
}
/**
 * Fetches jobs from `queues` in batches (long polling), runs their handlers with up to
 * `concurrency` at once, keeps their leases extended, acks or fails them, and heartbeats.
 * The server's `quiet` stops fetching; `terminate` (or SIGTERM, or `stop()`) shuts down
 * gracefully: no new jobs, running jobs get `shutdownGraceMs`, then what is left is failed with
 * errtype `WorkerShutdown` and `retry_in` `shutdownRetryIn` (so it retries elsewhere at once).
 * A job's lease is never dropped silently.
 */
export declare class Worker {
    readonly client: Client;
    readonly wid: string;
    processed: number;
    failed: number;
    private readonly handlers;
    private readonly middleware;
    private readonly startupHooks;
    private readonly shutdownHooks;
    private readonly queues;
    private readonly weights;
    private readonly timeoutGraceMs;
    private readonly concurrency;
    private readonly fetchBatch;
    private readonly fetchWait;
    private readonly beatIntervalMs;
    private readonly shutdownGraceMs;
    private readonly shutdownRetryIn;
    private readonly backtraceLines;
    private readonly extendAt;
    private readonly labels;
    private readonly handleSignals;
    private readonly onError;
    private readonly acks;
    /**
     * Fetched and not yet settled, one entry per attempt: a job killed and retried can be fetched
     * again while its earlier attempt's handler still runs, under the same jid.
     */
    private readonly running;
    /** Of those, the jobs whose handler has not returned. */
    private handling;
    /** Jobs asked for by the fetches in flight. */
    private requested;
    private readonly fetches;
    private fetchFailures;
    private stateValue;
    private stopping;
    /** When the shutdown grace ends (Date.now() milliseconds): set by the first stop, moved earlier by later ones. */
    private deadline;
    private fetchAbort;
    private wakeResolvers;
    private stopResolvers;
    constructor(options?: WorkerOptions);
    /**
     * Run `handler` for jobs of `jobtype`. What it returns (if JSON) is the job's result; a throw
     * fails the job (`RetryIn`/`NoRetry` steer its retry). A `timeout` no reservation can cover throws.
     */
    register(jobtype: string, handler: Handler, options?: HandlerOptions): this;
    /** Add a middleware around every job (after those already added). */
    use(middleware: Middleware): this;
    /** Run `hook` once when the worker starts, before it fetches (a throw stops `run`). */
    onStartup(hook: Hook): this;
    /** Run `hook` once when the worker stops, after its jobs were settled. */
    onShutdown(hook: Hook): this;
    get state(): WorkerState;
    get runningJids(): string[];
    /** Stop fetching; running jobs finish. */
    quiet(): void;
    /**
     * Graceful shutdown: quiet, give running jobs `graceMs`, fail what is left, then `run()` resolves.
     * Called again (a second signal, `terminate`), a shorter grace ends the wait sooner.
     */
    stop(graceMs?: number): void;
    /** Shut down now: running jobs are failed at once (they retry, after `shutdownRetryIn`). */
    terminate(): void;
    /** Run until stopped. Resolves once every fetched job has been settled or reported. */
    run(): Promise<void>;
    /**
     * Keeps fetches in flight for the capacity the running jobs leave free, until the worker stops.
     * A handler's slot frees when it returns, before its ack is confirmed: the ack goes out with
     * others (AckBatcher), and fetching only once it is confirmed would leave the worker idle for an
     * ack's round trip after every batch. Jobs awaiting their ack are bounded too (at most
     * `concurrency` of them besides the running handlers). A second fetch pipelines behind the
     * first, so a job pushed while one fetch's answer travels back, and while it is asked again,
     * finds the other one long-polling at the server.
     */
    private fetchLoop;
    private fetchOnce;
    private beatLoop;
    private start;
    /** `execute` itself threw (a bug, or a value nothing could handle): the attempt still fails, so its job is not left active. */
    private executeFailed;
    /** Frees `entry`'s handler slot (once), so the fetch loop may ask for more while its ack is on its way. */
    private handled;
    private execute;
    /**
     * Fills in what the fetch left out of the job's dependencies: results (`result_omitted`: one
     * answer carries dependency results only up to the server's budget) and dependencies
     * (`dependencies_omitted`: one answer lists only so many), so middleware and handler see every
     * dependency and result. Reads the job's dependency pages from the one holding the first result
     * left out, or else the first dependency not listed (the cursor is the dependency before it:
     * pages are in jid order, as the fetch lists them), until none is missing.
     */
    private fillOmittedResults;
    /**
     * The handler's outcome if it ends within `seconds`; else its signal is aborted with a
     * `TimeoutError`, and after `timeoutGraceMs` more the attempt is a `Timeout` failure whether it
     * stopped or not (a handler that ignores its signal runs on, without its slot).
     */
    private within;
    /**
     * Ack a completed job with its handler's result: false when the lease was no longer ours. Batched,
     * one refused result refuses its whole batch, so each job of that batch then acks on its own,
     * where only the refused result is dropped.
     */
    private ackCompleted;
    /** Ack with the handler's result; a result the server refuses is dropped so the job does not run again. */
    private ackWithResult;
    /** Stack lines a failure of `job` sends: the job's own `backtrace` (when > 0), within the worker's. */
    private maxLines;
    private settleFailure;
    /**
     * `send()`, tried again after a backoff while it fails for a reason retrying may fix: up to
     * SETTLE_TRIES tries, SETTLE_TRIES_STOPPING once the worker is stopping (a stop cuts a backoff
     * short). Each job waits on its own, so one job's retries hold up no other job's ack or fail.
     */
    private persist;
    private reportSettleError;
    /** Extend `entry`'s lease in `delayMs` (default: the regular interval), and again after each extension. */
    private scheduleExtend;
    /** Resolves false when a regular extension failed for a reason retrying may fix. */
    private extend;
    /**
     * Waits for the running jobs until the shutdown deadline (which a later stop may move earlier),
     * fails the ones whose handler is still running, and waits for the acks and fails under way.
     */
    private drain;
    private wake;
    private waitForWake;
    /** Sleep, cut short by stop(). */
    private pause;
    /** Sleep, cut short by the next stop() (also once stopping: a later stop shortens the grace). */
    private backoff;
}
