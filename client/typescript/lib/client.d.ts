import type { AckItem, AckManyResult, BatchListOptions, BatchNew, BatchPage, BatchStatus, Beat, BulkResult, Dependency, DependencyPage, DependencyPageOptions, ExtendOptions, ExtendResult, FailReport, FailResult, FetchRequest, FetchedJob, HistoryDay, HistoryOptions, Info, Job, JobFilter, JobListFilter, JobPage, JobPush, JobResult, PushedJob, PushJidsResult, PushManyResult, QueueDetail, WorkerInfo, WorkerState } from "./types.js";
export declare const VERSION = "0.1.0";
/** Jobs per batch push / ack request (the server's default limit). */
export declare const MAX_BATCH = 1000;
/** Dependencies per page asked for when reading pages through: the server's largest `limit`, so
 * its budget of result bytes, not a count, ends a page. */
export declare const DEPENDENCY_PAGE_MAX = 1000;
/** An open batch inside `Client.batch` or `Client.inBatch`: what is pushed through it joins it. */
export interface BatchHandle {
    bid: string;
    push(job: JobPush): Promise<PushedJob>;
    pushMany(jobs: JobPush[]): Promise<PushManyResult>;
    /** A child batch, a member of this one (settled in it when it finishes): opened, filled, committed. */
    batch(spec: Omit<BatchNew, "parent">, fill: (child: BatchHandle) => Promise<void>): Promise<BatchStatus>;
    /** How this batch stands now. */
    status(): Promise<BatchStatus>;
}
export interface ClientOptions {
    /** Server URL; default `WERK_URL`, else `http://127.0.0.1:7420`. */
    url?: string;
    /** Bearer token; default `WERK_TOKEN`. */
    token?: string;
    /** Per-request timeout in milliseconds, on top of a fetch's long-poll `wait` (default 10 000). */
    timeoutMs?: number;
    /** Tries after the first for transient failures (network errors, 502/503/504); default 3. */
    retries?: number;
}
/**
 * A new job id, in the form the server gives jobs pushed without one: the Unix time in
 * milliseconds above a 68-bit number, as 28 hex digits. The first jid of a millisecond takes a
 * random start and the others count up from it, so a process's jids only grow: a batch's keys
 * land side by side in the job table's primary key instead of each on a page of its own.
 */
export declare function newJid(): string;
/**
 * The Werk HTTP API, one method per endpoint. Every call either resolves with the parsed answer
 * or rejects with a typed `WerkError` (`LeaseLost`, `JobNotFound`, `ValidationError`, ...).
 * Transient failures are retried; pushes are safe to retry because a jid is assigned here.
 */
export declare class Client {
    readonly url: string;
    private readonly prefix;
    private readonly timeoutMs;
    private readonly retries;
    private readonly pool;
    constructor(options?: ClientOptions);
    /**
     * Enqueue one job; resolves with it as stored. Pushing an existing jid again stores nothing.
     * With `unique`, a job whose key another job holds is not stored: rejects with `NotUnique`
     * naming the holder (`on_conflict: "reject"`), or resolves with the holder, `duplicate: true`.
     * A job not started by `expires_at` (or `expires_in` seconds after `at` or now) never runs.
     */
    push(job: JobPush): Promise<PushedJob>;
    /**
     * Enqueue many jobs, 1,000 per request; each request is all-or-nothing (two jobs with one
     * unique key in a request are refused). A job whose unique key another job holds is answered
     * by the holder and listed in `conflicts`.
     */
    pushMany(jobs: JobPush[]): Promise<PushManyResult>;
    /**
     * Push a graph of jobs (a flow) in one request, all or nothing: items name each other by `ref`
     * in `depends_on` (or by jid); `refs` of the answer maps each ref to its jid. A job waits
     * (`waiting`) until its dependencies are settled, then is fetched with their results in
     * `dependencies`. A cycle or an unknown dependency rejects with a `ValidationError`
     * (`dependency_cycle`, `dependency_not_found`) and nothing is stored.
     */
    pushFlow(jobs: JobPush[]): Promise<PushManyResult>;
    /** As `pushMany`, answered with the jids only (`Prefer: return=minimal`), not the stored jobs. */
    pushJids(jobs: JobPush[]): Promise<PushJidsResult>;
    /**
     * Open a batch, run `fill` with it (its `push` and `pushMany` join the batch), then commit it;
     * resolves with the batch as committed. If `fill` throws, the batch is left open (not
     * committed) and the error propagates. Callbacks run once: `on_complete` when every member has
     * settled, `on_success` when every member has completed, `on_death` at the first member that
     * ends without completing.
     */
    batch(spec: BatchNew, fill: (batch: BatchHandle) => Promise<void>): Promise<BatchStatus>;
    /** Open an existing batch again, run `fill`, commit: how a member job adds work to its batch. */
    inBatch(bid: string, fill: (batch: BatchHandle) => Promise<void>): Promise<BatchStatus>;
    /** Open a new batch (`batch` wraps this, `fill` and the commit). */
    createBatch(spec?: BatchNew): Promise<BatchStatus>;
    /** Open a committed batch again; rejects with `BatchClosed` (`batch_finished`) once it finished. */
    reopenBatch(bid: string): Promise<BatchStatus>;
    /** Commit the batch: it finishes once no member is pending. */
    commitBatch(bid: string): Promise<BatchStatus>;
    /** How the batch stands; rejects with `BatchNotFound`. */
    batchStatus(bid: string): Promise<BatchStatus>;
    private handle;
    /** The job as stored; rejects with `JobNotFound` (completed jobs are deleted at ack). */
    get(jid: string): Promise<Job>;
    /**
     * Every dependency of the job, in jid order, each with its result: all its dependency pages,
     * which carry the results a fetch or `get` left out (`result_omitted`). Rejects with
     * `JobNotFound` when the job is not stored.
     */
    dependencies(jid: string, options?: {
        signal?: AbortSignal;
    }): Promise<Dependency[]>;
    /**
     * One page of the job's dependencies in jid order after the dependency `cursor` (a page's
     * `next`; none: from the first), each with its result: at most `limit` of them, and as many
     * results as the server's budget per answer holds (at least one). Rejects with `JobNotFound`.
     */
    dependencyPage(jid: string, page?: DependencyPageOptions, options?: {
        signal?: AbortSignal;
    }): Promise<DependencyPage>;
    /**
     * The job's outcome, waiting up to `wait` seconds (the server's long-poll limit applies) for it
     * to settle: `done` says whether it did. Rejects with `JobNotFound` when the job is not stored
     * (a job is deleted at ack unless pushed with `keep_result_for`).
     */
    result(jid: string, options?: {
        wait?: number;
        signal?: AbortSignal;
    }): Promise<JobResult>;
    info(): Promise<Info>;
    /**
     * A page of the jobs matching every filter given (`q`: words of their args, custom values,
     * errtype or message), `order` `"newest"` (default) or `"oldest"` first; pass the page's
     * `next_cursor` as `cursor` for the next one (null: this is the last page).
     */
    listJobs(filter?: JobListFilter): Promise<JobPage>;
    /**
     * Run a dead, expired, skipped or scheduled job now; resolves with the job as stored. Rejects
     * with a `WerkError` coded `job_state_conflict` (409) for a job in another state.
     */
    retryJob(jid: string): Promise<Job>;
    /** Move a scheduled, available, waiting or active job to dead (an active one's worker loses its lease). */
    killJob(jid: string): Promise<Job>;
    /** Cancel a scheduled, available, waiting or active job: it will not run (again). */
    cancelJob(jid: string): Promise<Job>;
    /** Delete the job, in any state; rejects with `JobNotFound` when none is stored. */
    deleteJob(jid: string): Promise<void>;
    /**
     * `retryJob` on every job matching `state`, `queue`, `jobtype`, `q` and `failed`, at most
     * `limit` (the server's default 1,000); `more` says jobs beyond it still match.
     */
    retryJobs(filter?: JobFilter): Promise<BulkResult>;
    /** `killJob` on every matching job (filter as `retryJobs`). */
    killJobs(filter?: JobFilter): Promise<BulkResult>;
    /** `cancelJob` on every matching job (filter as `retryJobs`). */
    cancelJobs(filter?: JobFilter): Promise<BulkResult>;
    /** Delete every matching job (filter as `retryJobs`). */
    deleteJobs(filter?: JobFilter): Promise<BulkResult>;
    /** The queues: jobs available (`size`), the oldest one's wait, whether each is paused. */
    listQueues(): Promise<QueueDetail[]>;
    /** The queue, with its jobs counted per state. */
    queue(name: string): Promise<QueueDetail>;
    /** Stop handing out the queue's jobs; pushes are still accepted. */
    pauseQueue(name: string): Promise<QueueDetail>;
    resumeQueue(name: string): Promise<QueueDetail>;
    /** Delete the queue's available jobs; resolves with how many were deleted. */
    clearQueue(name: string): Promise<number>;
    /** The live worker processes (with `includeGone`, also those that stopped beating). */
    listWorkers(options?: {
        includeGone?: boolean;
    }): Promise<WorkerInfo[]>;
    /**
     * Ask the worker to stop fetching (it hears it at its next beat); resolves with its state.
     * Rejects with a `WerkError` coded `worker_not_found` (404) for a wid not live.
     */
    quietWorker(wid: string): Promise<WorkerState>;
    /** Ask the worker to shut down (at its next beat); resolves with its state. */
    terminateWorker(wid: string): Promise<WorkerState>;
    /** `quietWorker` for every live worker; resolves with how many were asked. */
    quietWorkers(): Promise<number>;
    /** `terminateWorker` for every live worker; resolves with how many were asked. */
    terminateWorkers(): Promise<number>;
    /** Jobs processed, failed and pushed per UTC day, oldest first: the last `days` (server default 30), one queue's or all. */
    history(options?: HistoryOptions): Promise<HistoryDay[]>;
    /** A page of the batches, newest first (`unfinished`: only those not finished); pass the page's `next` as `cursor`. */
    listBatches(options?: BatchListOptions): Promise<BatchPage>;
    private jobAction;
    private bulk;
    private signal;
    /** Lease up to `count` jobs from `queues` (in order), long-polling up to `wait` seconds. */
    fetch(request: FetchRequest, signal?: AbortSignal): Promise<FetchedJob[]>;
    /**
     * The attempt succeeded. `result` (JSON; undefined or null: none) is stored with a job pushed
     * with `keep_result_for`. Rejects with `LeaseLost` when the lease is not current, and with
     * `ResultTooLarge` (a `PayloadTooLarge`, code `result_too_large`) when the result exceeds the
     * server's limit; nothing is acked then.
     */
    ack(jid: string, lease: string, result?: unknown): Promise<void>;
    /** Ack many; jobs whose lease is not current are listed in `lease_lost`, not raised. */
    ackMany(acks: AckItem[]): Promise<AckManyResult>;
    /** The attempt failed: the job retries after its backoff (or `retry_in`), or is dead. */
    fail(jid: string, lease: string, report?: FailReport): Promise<FailResult>;
    /** Push the lease's expiry forward, optionally recording a progress checkpoint. */
    extend(jid: string, lease: string, options?: ExtendOptions): Promise<ExtendResult>;
    /** A worker process's heartbeat; the answer is `running`, `quiet` or `terminate`. */
    beat(beat: Beat): Promise<WorkerState>;
    private send;
    private once;
}
