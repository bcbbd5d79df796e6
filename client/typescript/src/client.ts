import { randomFillSync } from "node:crypto";

import { Unavailable, WerkError, errorFromResponse } from "./errors.js";
import { type Answer, Pool, TimedOut } from "./transport.js";
import type {
  AckItem,
  AckManyResult,
  BatchListOptions,
  BatchNew,
  BatchPage,
  BatchStatus,
  Beat,
  BulkResult,
  Dependency,
  DependencyPage,
  DependencyPageOptions,
  ExtendOptions,
  ExtendResult,
  FailReport,
  FailResult,
  FetchRequest,
  FetchedJob,
  HistoryDay,
  HistoryOptions,
  Info,
  Job,
  JobFilter,
  JobListFilter,
  JobPage,
  JobPush,
  JobResult,
  PushedJob,
  PushJidsResult,
  PushManyResult,
  QueueDetail,
  WorkerInfo,
  WorkerState,
} from "./types.js";
import { RawJobs, readPushed, withJobs } from "./pushed.js";
import { checkTimeout, customTimeout } from "./timeouts.js";

export const VERSION = "0.1.0";
/** Jobs per batch push / ack request (the server's default limit). */
export const MAX_BATCH = 1000;
/** Dependencies per page asked for when reading pages through: the server's largest `limit`, so
 * its budget of result bytes, not a count, ends a page. */
export const DEPENDENCY_PAGE_MAX = 1000;

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

interface Call {
  method: "GET" | "POST" | "DELETE";
  path: string;
  body?: unknown;
  /** Extra time the server may legitimately take (long polls). */
  extraMs?: number;
  signal?: AbortSignal;
  headers?: Record<string, string>;
  /** Reads a successful answer's body (default `readJson`). */
  read?: (body: Buffer[]) => unknown;
  /** false: the request would do its work twice if repeated, so it is sent again only when it
   * surely never reached the server (the connection was refused) or the server answered that it
   * did nothing. */
  repeatable?: boolean;
}

/**
 * The jobs (each with a jid, so a retried push stores once) in requests of at most MAX_BATCH.
 * No jobs still make one (empty) request: the server's answer to it is the caller's.
 */
function jobBatches(jobs: JobPush[]): JobPush[][] {
  // One clock reading for the push, not one per job (a clock reading costs more than minting a
  // jid): its jids are minted as if in one millisecond, and still only grow.
  const now = Date.now();
  const all = jobs.map((job) => withJid(job, now));
  const batches: JobPush[][] = [];
  for (let start = 0; start < all.length || start === 0; start += MAX_BATCH) {
    batches.push(all.slice(start, start + MAX_BATCH));
    if (all.length === 0) break;
  }
  return batches;
}

/** The last jid newJid returned, in three parts: the milliseconds with 4 random bits below them,
 * then the 64 bits counted up from a random start, as two 32-bit halves; and the hex of all but
 * the low half's last byte (`stem`), which changes only every 256 jids: a jid is the stem and the
 * hex of one byte, rather than a number above 2^31 printed in hex (a slow path of V8's) per jid. */
const minted = { hi: 0, mid: 0, lo: 0, prefix: "", stem: "" };
const BYTE_HEX = Array.from({ length: 256 }, (_, byte) => hex(byte, 2));
// Random bytes for many milliseconds at once, each 9 used once: one draw from the system per 64
// new milliseconds instead of one per millisecond.
const randomPool = Buffer.alloc(64 * 9);
let randomUsed = randomPool.length;

/**
 * A new job id, in the form the server gives jobs pushed without one: the Unix time in
 * milliseconds above a 68-bit number, as 28 hex digits. The first jid of a millisecond takes a
 * random start and the others count up from it, so a process's jids only grow: a batch's keys
 * land side by side in the job table's primary key instead of each on a page of its own.
 */
export function newJid(): string {
  return mintJid(Date.now());
}

/** `newJid` at the clock reading `ms`. */
function mintJid(ms: number): string {
  if (Math.floor(minted.hi / 16) < ms) {
    if (randomUsed + 9 > randomPool.length) {
      randomFillSync(randomPool);
      randomUsed = 0;
    }
    minted.hi = ms * 16 + ((randomPool[randomUsed] as number) >> 4);
    minted.mid = randomPool.readUInt32BE(randomUsed + 1);
    minted.lo = randomPool.readUInt32BE(randomUsed + 5);
    randomUsed += 9;
  } else if (minted.lo < 0xffffffff) {
    minted.lo++;
    if ((minted.lo & 0xff) === 0) minted.stem = minted.prefix + hex(minted.lo >>> 8, 6);
    return minted.stem + (BYTE_HEX[minted.lo & 0xff] as string);
  } else {
    minted.lo = 0;
    if (minted.mid < 0xffffffff) minted.mid++;
    else {
      minted.mid = 0;
      minted.hi++;
    }
  }
  // In parts below 2^31: V8 prints a larger number in hex by a slow path.
  minted.prefix = hex(Math.floor(minted.hi / 0x1000000), 6) + hex(minted.hi % 0x1000000, 6)
    + hex(minted.mid >>> 16, 4) + hex(minted.mid & 0xffff, 4);
  minted.stem = minted.prefix + hex(minted.lo >>> 8, 6);
  return minted.stem + (BYTE_HEX[minted.lo & 0xff] as string);
}

function hex(value: number, digits: number): string {
  return value.toString(16).padStart(digits, "0");
}

/** Sleep, cut short when `signal` aborts; its listener goes with the sleep (a worker's signal lives long). */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * The Werk HTTP API, one method per endpoint. Every call either resolves with the parsed answer
 * or rejects with a typed `WerkError` (`LeaseLost`, `JobNotFound`, `ValidationError`, ...).
 * Transient failures are retried; pushes are safe to retry because a jid is assigned here.
 */
export class Client {
  readonly url: string;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly retries: number;
  // Its own HTTP/1.1 connections rather than node:http or the global fetch: a producer or worker
  // pays the transport's CPU on every push, fetch and ack, and both cost several times what the
  // request itself does (see transport.ts).
  private readonly pool: Pool;

  constructor(options: ClientOptions = {}) {
    this.url = (options.url ?? process.env.WERK_URL ?? "http://127.0.0.1:7420").replace(/\/+$/, "");
    const token = options.token ?? process.env.WERK_TOKEN;
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "application/json",
      "user-agent": `werk-client-node/${VERSION}`,
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    };
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.retries = options.retries ?? 3;
    const base = new URL(this.url);
    // Request targets are the base URL's path (a server behind a path prefix) plus the API's.
    this.prefix = base.pathname.replace(/\/+$/, "");
    // Idle connections are kept for reuse and do not keep the process alive.
    this.pool = new Pool(base.origin, headers);
  }

  // -- producer side -------------------------------------------------------------------------

  /**
   * Enqueue one job; resolves with it as stored. Pushing an existing jid again stores nothing.
   * With `unique`, a job whose key another job holds is not stored: rejects with `NotUnique`
   * naming the holder (`on_conflict: "reject"`), or resolves with the holder, `duplicate: true`.
   * A job not started by `expires_at` (or `expires_in` seconds after `at` or now) never runs.
   */
  async push(job: JobPush): Promise<PushedJob> {
    return (await this.send({ method: "POST", path: "/v1/jobs", body: withJid(job, Date.now()) })) as PushedJob;
  }

  /**
   * Enqueue many jobs, 1,000 per request; each request is all-or-nothing (two jobs with one
   * unique key in a request are refused). A job whose unique key another job holds is answered
   * by the holder and listed in `conflicts`.
   */
  async pushMany(jobs: JobPush[]): Promise<PushManyResult> {
    const merged: PushManyResult = { jids: [], created: 0, existed: [], jobs: [], conflicts: [], refs: {} };
    const pages: (RawJobs | PushManyResult["jobs"])[] = [];
    for (const chunk of jobBatches(jobs)) {
      const call: Call = { method: "POST", path: "/v1/jobs/batch", body: { jobs: chunk }, read: readPushedJobs };
      const result = (await this.send(call)) as Omit<PushManyResult, "jobs"> & { jobs: RawJobs | PushManyResult["jobs"] };
      for (const c of result.conflicts ?? []) merged.conflicts.push({ ...c, index: c.index + merged.jids.length });
      merged.jids.push(...result.jids);
      merged.existed.push(...result.existed);
      pages.push(result.jobs instanceof RawJobs ? result.jobs : [...result.jobs]);
      merged.created += result.created;
      Object.assign(merged.refs, result.refs ?? {});
    }
    // The jobs are parsed when first read: most producers never read them.
    return withJobs(merged, pages);
  }

  /**
   * Push a graph of jobs (a flow) in one request, all or nothing: items name each other by `ref`
   * in `depends_on` (or by jid); `refs` of the answer maps each ref to its jid. A job waits
   * (`waiting`) until its dependencies are settled, then is fetched with their results in
   * `dependencies`. A cycle or an unknown dependency rejects with a `ValidationError`
   * (`dependency_cycle`, `dependency_not_found`) and nothing is stored.
   */
  async pushFlow(jobs: JobPush[]): Promise<PushManyResult> {
    if (jobs.length > MAX_BATCH) throw new RangeError(`a flow is pushed in one request: at most ${MAX_BATCH} jobs`);
    const now = Date.now();
    const body = { jobs: jobs.map((job) => withJid(job, now)) };
    const result = (await this.send({ method: "POST", path: "/v1/jobs/batch", body })) as PushManyResult;
    return { ...result, conflicts: result.conflicts ?? [], refs: result.refs ?? {} };
  }

  /** As `pushMany`, answered with the jids only (`Prefer: return=minimal`), not the stored jobs. */
  async pushJids(jobs: JobPush[]): Promise<PushJidsResult> {
    const merged: PushJidsResult = { jids: [], created: 0, existed: [], conflicts: [], refs: {} };
    const headers = { prefer: "return=minimal" };
    for (const chunk of jobBatches(jobs)) {
      const body = { jobs: chunk };
      const result = (await this.send({ method: "POST", path: "/v1/jobs/batch", body, headers })) as PushJidsResult;
      for (const c of result.conflicts ?? []) merged.conflicts.push({ ...c, index: c.index + merged.jids.length });
      merged.jids.push(...result.jids);
      merged.existed.push(...result.existed);
      merged.created += result.created;
      Object.assign(merged.refs, result.refs ?? {});
    }
    return merged;
  }

  // -- batches -------------------------------------------------------------------------------

  /**
   * Open a batch, run `fill` with it (its `push` and `pushMany` join the batch), then commit it;
   * resolves with the batch as committed. If `fill` throws, the batch is left open (not
   * committed) and the error propagates. Callbacks run once: `on_complete` when every member has
   * settled, `on_success` when every member has completed, `on_death` at the first member that
   * ends without completing.
   */
  async batch(spec: BatchNew, fill: (batch: BatchHandle) => Promise<void>): Promise<BatchStatus> {
    const opened = await this.createBatch(spec);
    await fill(this.handle(opened.bid));
    return this.commitBatch(opened.bid);
  }

  /** Open an existing batch again, run `fill`, commit: how a member job adds work to its batch. */
  async inBatch(bid: string, fill: (batch: BatchHandle) => Promise<void>): Promise<BatchStatus> {
    await this.reopenBatch(bid);
    await fill(this.handle(bid));
    return this.commitBatch(bid);
  }

  /** Open a new batch (`batch` wraps this, `fill` and the commit). */
  async createBatch(spec: BatchNew = {}): Promise<BatchStatus> {
    const body: Record<string, unknown> = { ...spec };
    for (const kind of ["on_complete", "on_success", "on_death"] as const) {
      const job = spec[kind];
      if (job) body[kind] = withJid(job, Date.now());
    }
    // Not repeatable: a request whose answer was lost may have opened the batch, and sending it
    // again would open a second one.
    return (await this.send({ method: "POST", path: "/v1/batches", body, repeatable: false })) as BatchStatus;
  }

  /** Open a committed batch again; rejects with `BatchClosed` (`batch_finished`) once it finished. */
  async reopenBatch(bid: string): Promise<BatchStatus> {
    return (await this.send({ method: "POST", path: `/v1/batches/${encodeURIComponent(bid)}/open`, body: {} })) as BatchStatus;
  }

  /** Commit the batch: it finishes once no member is pending. */
  async commitBatch(bid: string): Promise<BatchStatus> {
    return (await this.send({ method: "POST", path: `/v1/batches/${encodeURIComponent(bid)}/commit`, body: {} })) as BatchStatus;
  }

  /** How the batch stands; rejects with `BatchNotFound`. */
  async batchStatus(bid: string): Promise<BatchStatus> {
    return (await this.send({ method: "GET", path: `/v1/batches/${encodeURIComponent(bid)}` })) as BatchStatus;
  }

  private handle(bid: string): BatchHandle {
    return {
      bid,
      push: (job) => this.push({ ...job, batch: bid }),
      pushMany: (jobs) => this.pushMany(jobs.map((job) => ({ ...job, batch: bid }))),
      batch: (spec, fill) => this.batch({ ...spec, parent: bid }, fill),
      status: () => this.batchStatus(bid),
    };
  }

  /** The job as stored; rejects with `JobNotFound` (completed jobs are deleted at ack). */
  async get(jid: string): Promise<Job> {
    return (await this.send({ method: "GET", path: `/v1/jobs/${encodeURIComponent(jid)}` })) as Job;
  }

  /**
   * Every dependency of the job, in jid order, each with its result: all its dependency pages,
   * which carry the results a fetch or `get` left out (`result_omitted`). Rejects with
   * `JobNotFound` when the job is not stored.
   */
  async dependencies(jid: string, options: { signal?: AbortSignal } = {}): Promise<Dependency[]> {
    const all: Dependency[] = [];
    let cursor: string | null = null;
    do {
      const page: DependencyPage = await this.dependencyPage(jid, { cursor, limit: DEPENDENCY_PAGE_MAX }, options);
      all.push(...page.dependencies);
      cursor = page.next;
    } while (cursor !== null);
    return all;
  }

  /**
   * One page of the job's dependencies in jid order after the dependency `cursor` (a page's
   * `next`; none: from the first), each with its result: at most `limit` of them, and as many
   * results as the server's budget per answer holds (at least one). Rejects with `JobNotFound`.
   */
  async dependencyPage(
    jid: string, page: DependencyPageOptions = {}, options: { signal?: AbortSignal } = {},
  ): Promise<DependencyPage> {
    const path = withQuery(`/v1/jobs/${encodeURIComponent(jid)}/dependencies`, page);
    return (await this.send({ method: "GET", path, signal: options.signal })) as DependencyPage;
  }

  /**
   * The job's outcome, waiting up to `wait` seconds (the server's long-poll limit applies) for it
   * to settle: `done` says whether it did. Rejects with `JobNotFound` when the job is not stored
   * (a job is deleted at ack unless pushed with `keep_result_for`).
   */
  async result(jid: string, options: { wait?: number; signal?: AbortSignal } = {}): Promise<JobResult> {
    const wait = Math.max(0, options.wait ?? 0);
    const query = wait > 0 ? `?wait=${wait}` : "";
    return (await this.send({
      method: "GET", path: `/v1/jobs/${encodeURIComponent(jid)}/result${query}`, extraMs: wait * 1000,
      signal: options.signal,
    })) as JobResult;
  }

  async info(): Promise<Info> {
    return (await this.send({ method: "GET", path: "/v1/info" })) as Info;
  }

  // -- admin ---------------------------------------------------------------------------------
  // Acting on jobs changes them, so those requests are not repeated after a lost answer: a second
  // cancel or delete would answer job_state_conflict or job_not_found for the job the first one
  // changed, and a second bulk action would also act on jobs that came to match meanwhile.
  // Pausing, resuming and signalling workers done twice are the same as once, and are repeated.

  /**
   * A page of the jobs matching every filter given (`q`: words of their args, custom values,
   * errtype or message), `order` `"newest"` (default) or `"oldest"` first; pass the page's
   * `next_cursor` as `cursor` for the next one (null: this is the last page).
   */
  async listJobs(filter: JobListFilter = {}): Promise<JobPage> {
    return (await this.send({ method: "GET", path: withQuery("/v1/jobs", filter) })) as JobPage;
  }

  /**
   * Run a dead, expired, skipped or scheduled job now; resolves with the job as stored. Rejects
   * with a `WerkError` coded `job_state_conflict` (409) for a job in another state.
   */
  async retryJob(jid: string): Promise<Job> {
    return this.jobAction(jid, "retry");
  }

  /** Move a scheduled, available, waiting or active job to dead (an active one's worker loses its lease). */
  async killJob(jid: string): Promise<Job> {
    return this.jobAction(jid, "kill");
  }

  /** Cancel a scheduled, available, waiting or active job: it will not run (again). */
  async cancelJob(jid: string): Promise<Job> {
    return this.jobAction(jid, "cancel");
  }

  /** Delete the job, in any state; rejects with `JobNotFound` when none is stored. */
  async deleteJob(jid: string): Promise<void> {
    await this.send({ method: "DELETE", path: `/v1/jobs/${encodeURIComponent(jid)}`, repeatable: false });
  }

  /**
   * `retryJob` on every job matching `state`, `queue`, `jobtype`, `q` and `failed`, at most
   * `limit` (the server's default 1,000); `more` says jobs beyond it still match.
   */
  async retryJobs(filter: JobFilter = {}): Promise<BulkResult> {
    return this.bulk("retry", filter);
  }

  /** `killJob` on every matching job (filter as `retryJobs`). */
  async killJobs(filter: JobFilter = {}): Promise<BulkResult> {
    return this.bulk("kill", filter);
  }

  /** `cancelJob` on every matching job (filter as `retryJobs`). */
  async cancelJobs(filter: JobFilter = {}): Promise<BulkResult> {
    return this.bulk("cancel", filter);
  }

  /** Delete every matching job (filter as `retryJobs`). */
  async deleteJobs(filter: JobFilter = {}): Promise<BulkResult> {
    return this.bulk("delete", filter);
  }

  /** The queues: jobs available (`size`), the oldest one's wait, whether each is paused. */
  async listQueues(): Promise<QueueDetail[]> {
    return ((await this.send({ method: "GET", path: "/v1/queues" })) as { queues: QueueDetail[] }).queues;
  }

  /** The queue, with its jobs counted per state. */
  async queue(name: string): Promise<QueueDetail> {
    return (await this.send({ method: "GET", path: `/v1/queues/${encodeURIComponent(name)}` })) as QueueDetail;
  }

  /** Stop handing out the queue's jobs; pushes are still accepted. */
  async pauseQueue(name: string): Promise<QueueDetail> {
    return (await this.send({ method: "POST", path: `/v1/queues/${encodeURIComponent(name)}/pause` })) as QueueDetail;
  }

  async resumeQueue(name: string): Promise<QueueDetail> {
    return (await this.send({ method: "POST", path: `/v1/queues/${encodeURIComponent(name)}/resume` })) as QueueDetail;
  }

  /** Delete the queue's available jobs; resolves with how many were deleted. */
  async clearQueue(name: string): Promise<number> {
    const path = `/v1/queues/${encodeURIComponent(name)}/jobs`;
    return ((await this.send({ method: "DELETE", path, repeatable: false })) as { deleted: number }).deleted;
  }

  /** The live worker processes (with `includeGone`, also those that stopped beating). */
  async listWorkers(options: { includeGone?: boolean } = {}): Promise<WorkerInfo[]> {
    const path = options.includeGone ? "/v1/workers?include_gone=true" : "/v1/workers";
    return ((await this.send({ method: "GET", path })) as { workers: WorkerInfo[] }).workers;
  }

  /**
   * Ask the worker to stop fetching (it hears it at its next beat); resolves with its state.
   * Rejects with a `WerkError` coded `worker_not_found` (404) for a wid not live.
   */
  async quietWorker(wid: string): Promise<WorkerState> {
    return this.signal(`/v1/workers/${encodeURIComponent(wid)}/quiet`);
  }

  /** Ask the worker to shut down (at its next beat); resolves with its state. */
  async terminateWorker(wid: string): Promise<WorkerState> {
    return this.signal(`/v1/workers/${encodeURIComponent(wid)}/terminate`);
  }

  /** `quietWorker` for every live worker; resolves with how many were asked. */
  async quietWorkers(): Promise<number> {
    return ((await this.send({ method: "POST", path: "/v1/workers/quiet" })) as { changed: number }).changed;
  }

  /** `terminateWorker` for every live worker; resolves with how many were asked. */
  async terminateWorkers(): Promise<number> {
    return ((await this.send({ method: "POST", path: "/v1/workers/terminate" })) as { changed: number }).changed;
  }

  /** Jobs processed, failed and pushed per UTC day, oldest first: the last `days` (server default 30), one queue's or all. */
  async history(options: HistoryOptions = {}): Promise<HistoryDay[]> {
    const path = withQuery("/v1/history", options);
    return ((await this.send({ method: "GET", path })) as { days: HistoryDay[] }).days;
  }

  /** A page of the batches, newest first (`unfinished`: only those not finished); pass the page's `next` as `cursor`. */
  async listBatches(options: BatchListOptions = {}): Promise<BatchPage> {
    return (await this.send({ method: "GET", path: withQuery("/v1/batches", options) })) as BatchPage;
  }

  private async jobAction(jid: string, action: "retry" | "kill" | "cancel"): Promise<Job> {
    const path = `/v1/jobs/${encodeURIComponent(jid)}/${action}`;
    return (await this.send({ method: "POST", path, repeatable: false })) as Job;
  }

  private async bulk(action: BulkResult["action"], filter: JobFilter): Promise<BulkResult> {
    const call: Call = { method: "POST", path: `/v1/jobs/${action}`, body: given(filter), repeatable: false };
    return (await this.send(call)) as BulkResult;
  }

  private async signal(path: string): Promise<WorkerState> {
    return ((await this.send({ method: "POST", path })) as { state: WorkerState }).state;
  }

  // -- worker side ---------------------------------------------------------------------------

  /** Lease up to `count` jobs from `queues` (in order), long-polling up to `wait` seconds. */
  async fetch(request: FetchRequest, signal?: AbortSignal): Promise<FetchedJob[]> {
    const body = { count: 1, wait: 0, ...request };
    const result = (await this.send({
      method: "POST", path: "/v1/fetch", body, extraMs: (body.wait ?? 0) * 1000, signal,
    })) as { jobs: FetchedJob[] };
    return result.jobs;
  }

  /**
   * The attempt succeeded. `result` (JSON; undefined or null: none) is stored with a job pushed
   * with `keep_result_for`. Rejects with `LeaseLost` when the lease is not current, and with
   * `ResultTooLarge` (a `PayloadTooLarge`, code `result_too_large`) when the result exceeds the
   * server's limit; nothing is acked then.
   */
  async ack(jid: string, lease: string, result?: unknown): Promise<void> {
    const body = result === undefined || result === null ? { lease } : { lease, result };
    await this.send({ method: "POST", path: `/v1/jobs/${encodeURIComponent(jid)}/ack`, body });
  }

  /** Ack many; jobs whose lease is not current are listed in `lease_lost`, not raised. */
  async ackMany(acks: AckItem[]): Promise<AckManyResult> {
    const merged: AckManyResult = { acked: [], lease_lost: [] };
    for (let start = 0; start < acks.length; start += MAX_BATCH) {
      const chunk = acks.slice(start, start + MAX_BATCH);
      const result = (await this.send({ method: "POST", path: "/v1/ack", body: { acks: chunk } })) as AckManyResult;
      merged.acked.push(...result.acked);
      merged.lease_lost.push(...result.lease_lost);
    }
    return merged;
  }

  /** The attempt failed: the job retries after its backoff (or `retry_in`), or is dead. */
  async fail(jid: string, lease: string, report: FailReport = {}): Promise<FailResult> {
    return (await this.send({
      method: "POST", path: `/v1/jobs/${encodeURIComponent(jid)}/fail`, body: { lease, ...report },
    })) as FailResult;
  }

  /** Push the lease's expiry forward, optionally recording a progress checkpoint. */
  async extend(jid: string, lease: string, options: ExtendOptions = {}): Promise<ExtendResult> {
    return (await this.send({
      method: "POST", path: `/v1/jobs/${encodeURIComponent(jid)}/extend`, body: { lease, ...options },
    })) as ExtendResult;
  }

  /** A worker process's heartbeat; the answer is `running`, `quiet` or `terminate`. */
  async beat(beat: Beat): Promise<WorkerState> {
    const reply = (await this.send({ method: "POST", path: "/v1/beat", body: beat })) as { state: WorkerState };
    return reply.state;
  }

  // -- transport -----------------------------------------------------------------------------

  private async send(call: Call): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(call);
      } catch (error) {
        const transient = error instanceof Unavailable;
        if (!transient || attempt >= this.retries || call.signal?.aborted) throw error;
        if (call.repeatable === false && error.code === "unreachable" && !neverSent(error)) throw error;
        const delay = Math.min(2000, 100 * 2 ** attempt) * (0.5 + Math.random() / 2);
        await sleep(Math.max(delay, (error.retryAfter ?? 0) * 1000), call.signal);
      }
    }
  }

  private async once(call: Call): Promise<unknown> {
    let answer: Answer;
    try {
      const payload = call.body === undefined ? undefined : JSON.stringify(call.body);
      answer = await this.pool.request(
        call.method, this.prefix + call.path, payload, call.headers, this.timeoutMs + (call.extraMs ?? 0), call.signal,
      );
    } catch (cause) {
      if (call.signal?.aborted) throw new WerkError("the request was aborted", { code: "aborted", cause });
      const what = cause instanceof TimedOut ? "timed out" : "failed";
      throw new Unavailable(`${call.method} ${call.path} ${what}: ${String(cause)}`, { code: "unreachable", cause });
    }
    if (answer.status >= 200 && answer.status < 300) return (call.read ?? readJson)(answer.body);
    const retryAfter = Number(answer.retryAfter) || undefined;
    throw errorFromResponse(answer.status, readJson(answer.body), retryAfter);
  }
}

/** `job` with a jid: itself when it has one, else a copy given a new one (minted at `now`). */
function withJid(job: JobPush, now: number): JobPush {
  const timeout = customTimeout(job.custom);
  if (timeout !== undefined) checkTimeout(timeout, job.reserve_for ?? undefined, `job ${JSON.stringify(job.jobtype)}`);
  // Object.assign, not a spread: V8 takes a slow path for a spread copy with a property added
  // after it, and this runs once per job of a batch.
  return job.jid ? job : Object.assign({}, job, { jid: mintJid(now) });
}

/** A batch push's answer, its jobs left as bytes (`RawJobs`) unless its layout is not the expected one. */
function readPushedJobs(body: Buffer[]): unknown {
  return readPushed(body) ?? readJson(body);
}

/** An answer's body as JSON; the text itself when it is not JSON, null when there is none. */
function readJson(body: Buffer[]): unknown {
  if (body.length === 0) return null;
  const text = (body.length === 1 ? (body[0] as Buffer) : Buffer.concat(body)).toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The entries given (neither undefined nor null): a request names only the filters set. */
function given(params: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(params).filter(([, value]) => value !== undefined && value !== null));
}

/** `path` with the parameters given as its query (booleans as `true`/`false`). */
function withQuery(path: string, params: object): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(given(params))) query.append(name, String(value));
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/** The request failed before a connection existed, so the server saw nothing of it. */
function neverSent(error: Unavailable): boolean {
  return (error.cause as NodeJS.ErrnoException | undefined)?.code === "ECONNREFUSED";
}
