import type { components, operations } from "./openapi.js";
type Schemas = components["schemas"];
type Query<Op extends keyof operations> = NonNullable<operations[Op]["parameters"]["query"]>;
/** A job as the server shows it (never with its lease: that is its holder's secret). */
export type Job = Schemas["Job"];
/**
 * A job as a fetch hands it over, with the lease that acks, fails and extends this attempt.
 * `dependencies_omitted` (true, else absent): `dependencies` lists only the first of them, as one
 * answer lists only the server's `WERK_MAX_DEPENDENCIES_LISTED`; a `Worker` reads the rest before
 * its handler runs.
 */
export type FetchedJob = Schemas["FetchedJob"];
/** The answer to a push: the job as stored; `created` is false when its jid existed already. */
export type PushedJob = Schemas["PushedJob"];
/** What a producer sends to enqueue a job: `jobtype` is required, everything else optional. */
export type JobPush = Schemas["JobPush"];
export type JobState = Schemas["JobState"];
export type Failure = Schemas["Failure"];
/**
 * One dependency of a job pushed with `depends_on`: its outcome and, once completed, its result.
 * `result_omitted` (true, else absent): the answer left the result out (`result` null), as one
 * answer carries dependency results only up to the server's `WERK_MAX_DEPENDENCY_RESULTS_BYTES`;
 * `Client.dependencies` reads them all, and a `Worker` fills them in before its handler runs.
 */
export type Dependency = Schemas["Dependency"];
/** A page of a job's dependencies in jid order, each with its result; `next` (null: the last page) asks for the next. */
export type DependencyPage = Schemas["DependencyPage"];
/** Which page `Client.dependencyPage` reads: after the dependency `cursor` (a page's `next`), at most `limit` (1..1000, server default 100). */
export type DependencyPageOptions = Query<"jobs-dependencies">;
/** A job depending on the one read. */
export type Dependent = Schemas["Dependent"];
/** What a job does when a dependency ends badly: `fail`, `skip` or `ignore`. */
export type DependencyPolicy = Schemas["DependencyPolicy"];
/** A push's unique lock (`for`, `until`, `key`, `by`, `on_conflict`). */
export type Unique = Schemas["UniqueBody"];
/** A batch item whose unique key another job held. */
export type UniqueConflict = Schemas["UniqueConflict"];
/** The answer to a batch push: the jids, how many were new, which existed, and the stored jobs. */
export type PushManyResult = Required<Schemas["JobBatchPushed"]>;
/**
 * The short answer to a batch push: every jid in input order, how many were new, which existed,
 * the unique `conflicts` and each item's `ref` mapped to its jid (`refs`).
 */
export type PushJidsResult = Required<Omit<Schemas["JobBatchPushed"], "jobs">>;
export type AckItem = Schemas["AckItem"];
export type AckManyResult = Schemas["AckBatchResult"];
export type FailResult = Schemas["FailResult"];
/** A job's outcome for whoever waits for it (`Client.result`). */
export type JobResult = Schemas["JobResult"];
export type ExtendResult = Schemas["Extended"];
export type Beat = Schemas["Beat"];
export type WorkerState = Schemas["BeatReply"]["state"];
export type Info = Schemas["Info"];
export type Problem = Schemas["Problem"];
/** What opens a batch: `description`, `parent` and the callbacks `on_complete`, `on_success`, `on_death`. */
export type BatchNew = Schemas["BatchNew"];
/** How a batch stands: its counts, state, callbacks (jid and state), parent and children. */
export type BatchStatus = Schemas["Batch"];
export type FieldError = Schemas["ProblemFieldError"];
/** Which jobs `Client.listJobs` lists: every filter given must match; `order`, `cursor`, `limit` page them. */
export type JobListFilter = Query<"admin-jobs-list">;
/** A page of jobs; `next_cursor` (null: the last page) asks for the next. */
export type JobPage = Schemas["JobPage"];
/** Which jobs a bulk action (`retryJobs`, `killJobs`, `cancelJobs`, `deleteJobs`) covers, and how many at most (`limit`). */
export type JobFilter = Schemas["BulkAction"];
/** What a bulk action did: `changed` jobs; `more`: it stopped at `limit` and jobs still match. */
export type BulkResult = Schemas["BulkResult"];
/** A queue: jobs available (`size`), the oldest one's wait, paused or not, and its jobs counted per state (`counts`; states with none are absent). */
export type QueueDetail = Schemas["QueueDetail"];
/** A worker process as its beats describe it: `state` is what the server asks of it, `reported_state` what it said. */
export type WorkerInfo = Schemas["Worker"];
/** What `Client.history` covers: the last `days` (server default 30), of one `queue` or all. */
export type HistoryOptions = Query<"admin-history">;
/** Jobs processed, failed and pushed on one UTC day (`day`: YYYY-MM-DD). */
export type HistoryDay = Schemas["HistoryDay"];
/** Which batches `Client.listBatches` lists (`unfinished`: only those not finished), and the page. */
export type BatchListOptions = Query<"admin-batches-list">;
/** A page of batches; `next` (null: the last page) asks for the next. */
export type BatchPage = Schemas["BatchPage"];
export interface FetchRequest {
    /** Queues to take jobs from, tried in this order. */
    queues: string[];
    /** The worker process id (the same `wid` the worker beats with). */
    wid: string;
    /** How many jobs at most (1..100, default 1). */
    count?: number;
    /** Long-poll up to this many seconds for a job to arrive (0..30, default 0). */
    wait?: number;
}
export interface FailReport {
    errtype?: string;
    message?: string;
    backtrace?: string[];
    /** Retry after this many seconds instead of the backoff. */
    retry_in?: number;
    /** `false`: no retry, the job is dead at once. */
    retry?: false;
}
export interface ExtendOptions {
    /** New reservation in seconds from now (60..86400; default: the job's own `reserve_for`). */
    reserve_for?: number;
    /** A checkpoint the next attempt receives as `job.progress`. */
    progress?: unknown;
}
export {};
