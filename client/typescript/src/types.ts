// Wire types, taken from the generated OpenAPI types (src/openapi.ts; `npm run generate`).
import type { components } from "./openapi.js";

type Schemas = components["schemas"];

/** A job as the server shows it (never with its lease: that is its holder's secret). */
export type Job = Schemas["Job"];
/** A job as a fetch hands it over, with the lease that acks, fails and extends this attempt. */
export type FetchedJob = Schemas["FetchedJob"];
/** The answer to a push: the job as stored; `created` is false when its jid existed already. */
export type PushedJob = Schemas["PushedJob"];
/** What a producer sends to enqueue a job: `jobtype` is required, everything else optional. */
export type JobPush = Schemas["JobPush"];
export type JobState = Schemas["JobState"];
export type Failure = Schemas["Failure"];
/** One dependency of a job pushed with `depends_on`: its outcome and, once completed, its result. */
export type Dependency = Schemas["Dependency"];
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
