import { hostname as osHostname } from "node:os";

import { AckBatcher } from "./acks.js";
import { Client, type ClientOptions, DEPENDENCY_PAGE_MAX, newJid } from "./client.js";
import { JobNotFound, LeaseLost, NoRetry, PayloadTooLarge, RetryIn, ValidationError, WerkError } from "./errors.js";
import { RESERVE_FOR_MAX, TIMEOUT_ERRTYPE, TimeoutError, checkTimeout, customTimeout, weightedOrder } from "./timeouts.js";
import type { Dependency, FailReport, FetchedJob, WorkerState } from "./types.js";

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

interface Running {
  job: FetchedJob;
  /** Made when the job's signal is first asked for (abort() before that only notes why). */
  controller?: AbortController;
  /** Aborted (lease lost, shut down, timed out), with why. */
  aborted?: { reason: unknown };
  lost: boolean;
  /** Its handler returned (or never ran): its slot of `concurrency` is free. */
  handled: boolean;
  /** Its ack or fail is under way (or sent): whoever set it settles the attempt, nobody else. */
  settling: boolean;
  /** Gone from `running`: its lease is no longer kept. */
  finished: boolean;
  timedOut?: boolean;
  extendTimer?: NodeJS.Timeout;
}

// Tries to deliver an ack or fail the server did not take (each try already retried by the
// client): a server restart takes seconds, and a job whose outcome is lost runs again once its
// lease expires. Fewer while stopping, so an outage cannot hold the exit for long.
const SETTLE_TRIES = 6;
const SETTLE_TRIES_STOPPING = 3;
const SETTLE_BACKOFF_MS = 500;
const SETTLE_BACKOFF_CAP_MS = 10_000;
// A failed lease extension is tried again this soon (or at half the interval, if shorter): the
// regular interval may end after the lease did.
const EXTEND_RETRY_MS = 5_000;
// The shortest interval between a lease's extensions, whatever its reservation.
const EXTEND_MIN_MS = 200;
const REFUSED_REPORT = "(the failure details were refused by the server)";

/**
 * Fetches jobs from `queues` in batches (long polling), runs their handlers with up to
 * `concurrency` at once, keeps their leases extended, acks or fails them, and heartbeats.
 * The server's `quiet` stops fetching; `terminate` (or SIGTERM, or `stop()`) shuts down
 * gracefully: no new jobs, running jobs get `shutdownGraceMs`, then what is left is failed with
 * errtype `WorkerShutdown` and `retry_in` `shutdownRetryIn` (so it retries elsewhere at once).
 * A job's lease is never dropped silently.
 */
export class Worker {
  readonly client: Client;
  readonly wid: string;
  processed = 0;
  failed = 0;
  private readonly handlers = new Map<string, { handler: Handler; timeout?: number }>();
  private readonly middleware: Middleware[];
  private readonly startupHooks: Hook[] = [];
  private readonly shutdownHooks: Hook[] = [];
  private readonly queues: string[];
  private readonly weights: Record<string, number> | undefined;
  private readonly timeoutGraceMs: number;
  private readonly concurrency: number;
  private readonly fetchBatch: number;
  private readonly fetchWait: number;
  private readonly beatIntervalMs: number;
  private readonly shutdownGraceMs: number;
  private readonly shutdownRetryIn: number;
  private readonly backtraceLines: number;
  private readonly extendAt: number;
  private readonly labels: string[];
  private readonly handleSignals: boolean;
  private readonly onError: (error: unknown, job?: FetchedJob) => void;
  private readonly acks: AckBatcher | undefined;
  /**
   * Fetched and not yet settled, one entry per attempt: a job killed and retried can be fetched
   * again while its earlier attempt's handler still runs, under the same jid.
   */
  private readonly running = new Set<Running>();
  /** Of those, the jobs whose handler has not returned. */
  private handling = 0;
  /** Jobs asked for by the fetches in flight. */
  private requested = 0;
  private readonly fetches = new Set<Promise<void>>();
  private fetchFailures = 0;
  private stateValue: WorkerState = "running";
  private stopping = false;
  /** When the shutdown grace ends (Date.now() milliseconds): set by the first stop, moved earlier by later ones. */
  private deadline = Infinity;
  private fetchAbort = new AbortController();
  private wakeResolvers: Array<() => void> = [];
  private stopResolvers: Array<() => void> = [];

  constructor(options: WorkerOptions = {}) {
    this.client = options.client ?? new Client(options);
    this.wid = options.wid ?? newJid();
    this.queues = options.queues ?? ["default"];
    this.weights = options.weights;
    for (const [queue, weight] of Object.entries(this.weights ?? {})) {
      if (!this.queues.includes(queue)) throw new RangeError(`weights name a queue not in queues: ${queue}`);
      if (!(weight >= 1)) throw new RangeError(`queue weights must be >= 1 (${queue}: ${weight})`);
    }
    this.timeoutGraceMs = options.timeoutGraceMs ?? 5_000;
    this.middleware = [...(options.middleware ?? [])];
    this.concurrency = Math.max(1, options.concurrency ?? 10);
    this.fetchBatch = Math.min(100, Math.max(1, options.fetchBatch ?? 100));
    this.fetchWait = options.fetchWait ?? 25;
    this.beatIntervalMs = options.beatIntervalMs ?? 15_000;
    this.shutdownGraceMs = options.shutdownGraceMs ?? 25_000;
    this.shutdownRetryIn = options.shutdownRetryIn ?? 0;
    if (!(this.shutdownRetryIn >= 0)) throw new RangeError(`shutdownRetryIn must be >= 0 (${this.shutdownRetryIn})`);
    this.backtraceLines = options.backtraceLines ?? 50;
    this.extendAt = options.extendAt ?? 1 / 3;
    this.labels = options.labels ?? ["node"];
    this.handleSignals = options.handleSignals ?? true;
    const report = (error: unknown, job?: FetchedJob): void => console.error(`werk worker${job ? ` (job ${job.jid})` : ""}:`, error);
    const onError = options.onError ?? report;
    // What cannot be thrown must not throw either: a throwing onError would reject a job's settling.
    this.onError = (error, job) => {
      try {
        onError(error, job);
      } catch (failure) {
        report(failure, job);
      }
    };
    this.acks = options.batchAck === false ? undefined : new AckBatcher(this.client);
    for (const [jobtype, handler] of Object.entries(options.handlers ?? {})) this.register(jobtype, handler);
  }

  /**
   * Run `handler` for jobs of `jobtype`. What it returns (if JSON) is the job's result; a throw
   * fails the job (`RetryIn`/`NoRetry` steer its retry). A `timeout` no reservation can cover throws.
   */
  register(jobtype: string, handler: Handler, options: HandlerOptions = {}): this {
    const timeout =
      options.timeout === undefined ? undefined : checkTimeout(options.timeout, RESERVE_FOR_MAX, `handler ${JSON.stringify(jobtype)}`);
    this.handlers.set(jobtype, { handler, timeout });
    return this;
  }

  /** Add a middleware around every job (after those already added). */
  use(middleware: Middleware): this {
    this.middleware.push(middleware);
    return this;
  }

  /** Run `hook` once when the worker starts, before it fetches (a throw stops `run`). */
  onStartup(hook: Hook): this {
    this.startupHooks.push(hook);
    return this;
  }

  /** Run `hook` once when the worker stops, after its jobs were settled. */
  onShutdown(hook: Hook): this {
    this.shutdownHooks.push(hook);
    return this;
  }

  get state(): WorkerState {
    return this.stateValue;
  }

  get runningJids(): string[] {
    return [...this.running].map((entry) => entry.job.jid);
  }

  /** Stop fetching; running jobs finish. */
  quiet(): void {
    if (this.stateValue === "running") this.stateValue = "quiet";
    this.fetchAbort.abort();
    this.wake();
  }

  /**
   * Graceful shutdown: quiet, give running jobs `graceMs`, fail what is left, then `run()` resolves.
   * Called again (a second signal, `terminate`), a shorter grace ends the wait sooner.
   */
  stop(graceMs: number = this.shutdownGraceMs): void {
    this.deadline = Math.min(this.deadline, Date.now() + Math.max(0, graceMs));
    this.stopping = true;
    this.stateValue = "terminate";
    this.fetchAbort.abort();
    this.wake();
    for (const resolve of this.stopResolvers.splice(0)) resolve();
  }

  /** Shut down now: running jobs are failed at once (they retry, after `shutdownRetryIn`). */
  terminate(): void {
    this.stop(0);
  }

  /** Run until stopped. Resolves once every fetched job has been settled or reported. */
  async run(): Promise<void> {
    this.stateValue = "running";
    this.stopping = false;
    this.deadline = Infinity;
    this.fetchAbort = new AbortController();
    this.handling = 0;
    this.requested = 0;
    const onSignal = (): void => {
      // A second signal cuts the grace period.
      this.stop(this.stopping ? 0 : this.shutdownGraceMs);
    };
    for (const hook of this.startupHooks) await hook();
    if (this.handleSignals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    const beats = this.beatLoop();
    try {
      await this.fetchLoop();
      await this.drain();
    } finally {
      if (this.handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
      this.stopping = true;
      for (const resolve of this.stopResolvers.splice(0)) resolve();
      await beats;
      for (const hook of this.shutdownHooks) {
        try {
          await hook();
        } catch (error) {
          this.onError(error);
        }
      }
    }
  }

  // -- loops ---------------------------------------------------------------------------------

  /**
   * Keeps fetches in flight for the capacity the running jobs leave free, until the worker stops.
   * A handler's slot frees when it returns, before its ack is confirmed: the ack goes out with
   * others (AckBatcher), and fetching only once it is confirmed would leave the worker idle for an
   * ack's round trip after every batch. Jobs awaiting their ack are bounded too (at most
   * `concurrency` of them besides the running handlers). A second fetch pipelines behind the
   * first, so a job pushed while one fetch's answer travels back, and while it is asked again,
   * finds the other one long-polling at the server.
   */
  private async fetchLoop(): Promise<void> {
    const maxFetches = Math.max(2, Math.ceil(this.concurrency / this.fetchBatch));
    // With a fetch already in flight, the next one waits for half a batch of free capacity:
    // handlers that end one by one would otherwise each send a fetch for one or two jobs.
    const floor = Math.max(1, Math.floor(Math.min(this.fetchBatch, this.concurrency) / 2));
    this.fetchFailures = 0;
    while (!this.stopping) {
      const free =
        Math.min(this.concurrency - this.handling, 2 * this.concurrency - this.running.size) - this.requested;
      const need = this.fetches.size > 0 ? floor : 1;
      if (this.stateValue !== "running" || free < need || this.fetches.size >= maxFetches) {
        await this.waitForWake();
        continue;
      }
      if (this.fetchAbort.signal.aborted) this.fetchAbort = new AbortController();
      const count = Math.min(this.fetchBatch, free);
      this.requested += count;
      const fetch = this.fetchOnce(count, this.fetchAbort.signal).finally(() => {
        this.requested -= count;
        this.fetches.delete(fetch);
        this.wake();
      });
      this.fetches.add(fetch);
    }
    // Jobs a fetch still in flight leases are ours to run.
    while (this.fetches.size > 0) await Promise.all([...this.fetches]);
  }

  private async fetchOnce(count: number, signal: AbortSignal): Promise<void> {
    let jobs: FetchedJob[];
    try {
      jobs = await this.client.fetch(
        { queues: this.weights ? weightedOrder(this.queues, this.weights) : this.queues, wid: this.wid, count, wait: this.fetchWait },
        signal,
      );
      this.fetchFailures = 0;
    } catch (error) {
      if (signal.aborted) return;
      this.onError(error);
      this.fetchFailures++;
      // The capacity stays asked for while backing off, so no other fetch hammers a server that is down.
      await this.pause(Math.min(10_000, 250 * 2 ** this.fetchFailures));
      return;
    }
    for (const job of jobs) this.start(job);
  }

  private async beatLoop(): Promise<void> {
    while (!this.stopping) {
      try {
        const told = await this.client.beat({
          wid: this.wid,
          hostname: osHostname(),
          pid: process.pid,
          labels: this.labels,
          current_state: this.stateValue,
          rss_kb: Math.round(process.memoryUsage().rss / 1024),
        });
        if (told === "quiet" && this.stateValue === "running") this.quiet();
        if (told === "terminate") this.stop();
      } catch (error) {
        this.onError(error);
      }
      await this.pause(this.beatIntervalMs);
    }
  }

  // -- one job -------------------------------------------------------------------------------

  private start(job: FetchedJob): void {
    const entry: Running = { job, lost: false, handled: false, settling: false, finished: false };
    this.running.add(entry);
    this.handling++;
    this.scheduleExtend(entry);
    void this.execute(entry)
      .catch((error: unknown) => this.executeFailed(entry, error))
      .finally(() => {
        entry.finished = true;
        clearTimeout(entry.extendTimer);
        this.running.delete(entry);
        this.handled(entry);
        this.wake();
      });
  }

  /** `execute` itself threw (a bug, or a value nothing could handle): the attempt still fails, so its job is not left active. */
  private async executeFailed(entry: Running, error: unknown): Promise<void> {
    this.onError(error, entry.job);
    this.handled(entry);
    if (entry.settling || entry.lost) return;
    entry.settling = true;
    clearTimeout(entry.extendTimer);
    await this.settleFailure(entry, { errtype: "WorkerError", message: `the worker could not run the job: ${text(error)}`, backtrace: [] });
  }

  /** Frees `entry`'s handler slot (once), so the fetch loop may ask for more while its ack is on its way. */
  private handled(entry: Running): void {
    if (entry.handled) return;
    entry.handled = true;
    this.handling--;
    this.wake();
  }

  private async execute(entry: Running): Promise<void> {
    const { job } = entry;
    const registered = this.handlers.get(job.jobtype);
    if (registered === undefined) {
      entry.settling = true;
      await this.settleFailure(entry, {
        errtype: "UnknownJobType",
        message: `no handler registered for jobtype ${JSON.stringify(job.jobtype)} on this worker`,
        backtrace: [],
      });
      return;
    }
    const ctx: JobContext = {
      job,
      get signal() {
        return signalOf(entry);
      },
      checkpoint: async (progress) => {
        await this.extend(entry, progress, true);
      },
    };
    let timeout: number | undefined;
    try {
      const custom = customTimeout(job.custom);
      timeout = custom === undefined ? registered.timeout : checkTimeout(custom, job.reserve_for, `job ${job.jid}`);
    } catch (error) {
      // Pushed around the SDK's check: it can never run within its reservation.
      entry.settling = true;
      await this.settleFailure(entry, { errtype: "InvalidTimeout", message: text((error as Error).message), backtrace: [], retry: false });
      return;
    }
    try {
      // Outside the job's timeout, which bounds its handler; the client's own timeouts and
      // retries bound the reading, and the lease is kept extended meanwhile as for a handler.
      await this.fillOmittedResults(entry);
    } catch (error) {
      this.handled(entry);
      // Settled elsewhere (lease lost / shut down, which abort the reading).
      if (entry.settling || entry.lost || entry.aborted !== undefined) return;
      entry.settling = true;
      clearTimeout(entry.extendTimer);
      await this.settleFailure(entry, describeFailure(error, this.maxLines(job)));
      return;
    }
    let call = (): Promise<unknown> => Promise.resolve().then(() => registered.handler(job.args as unknown[], ctx));
    for (let i = this.middleware.length - 1; i >= 0; i--) {
      const middleware = this.middleware[i] as Middleware;
      const next = call;
      call = () => Promise.resolve().then(() => middleware(ctx, next));
    }
    const running = call().then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    const outcome = timeout === undefined ? await running : await this.within(entry, running, timeout);
    this.handled(entry);
    // Settled elsewhere (lease lost / shut down); a timed-out job is this worker's to fail.
    if (entry.settling || entry.lost || (entry.aborted !== undefined && !entry.timedOut)) return;
    entry.settling = true;
    clearTimeout(entry.extendTimer);
    if (outcome.ok) {
      try {
        const result = sendable(outcome.value);
        if (!(await this.persist(() => this.ackCompleted(job.jid, job.lease, result)))) {
          entry.lost = true; // the lease was no longer ours: the job is someone else's now
          return;
        }
        this.processed++;
      } catch (error) {
        this.reportSettleError(error, entry);
      }
    } else {
      await this.settleFailure(entry, describeFailure(outcome.error, this.maxLines(job)));
    }
  }

  /**
   * Fills in what the fetch left out of the job's dependencies: results (`result_omitted`: one
   * answer carries dependency results only up to the server's budget) and dependencies
   * (`dependencies_omitted`: one answer lists only so many), so middleware and handler see every
   * dependency and result. Reads the job's dependency pages from the one holding the first result
   * left out, or else the first dependency not listed (the cursor is the dependency before it:
   * pages are in jid order, as the fetch lists them), until none is missing.
   */
  private async fillOmittedResults(entry: Running): Promise<void> {
    const { job } = entry;
    const dependencies = job.dependencies ?? [];
    const unlisted = job.dependencies_omitted === true;
    let first = dependencies.findIndex((dep) => dep.result_omitted);
    if (first < 0) {
      if (!unlisted) return;
      first = dependencies.length;
    }
    const signal = signalOf(entry);
    const missing = new Map<string, Dependency>();
    for (const dep of dependencies) if (dep.result_omitted) missing.set(dep.jid, dep);
    const listed = unlisted ? new Set(dependencies.map((dep) => dep.jid)) : undefined;
    let cursor = first > 0 ? (dependencies[first - 1] as Dependency).jid : null;
    while (missing.size > 0 || listed !== undefined) {
      const page = await this.client.dependencyPage(job.jid, { cursor, limit: DEPENDENCY_PAGE_MAX }, { signal });
      for (const read of page.dependencies) {
        const dep = missing.get(read.jid);
        if (dep !== undefined) {
          dep.result = read.result;
          delete dep.result_omitted;
          missing.delete(read.jid);
        } else if (listed !== undefined && !listed.has(read.jid)) {
          dependencies.push(read); // after every dependency listed, in jid order as they are
        }
      }
      if (page.next === null) break;
      cursor = page.next;
    }
    if (missing.size > 0) {
      const example = missing.keys().next().value as string;
      throw new WerkError(`job ${job.jid}: ${missing.size} dependency results left out are not in its pages (${example}, ...)`, {
        code: "dependencies_incomplete",
      });
    }
    if (unlisted) {
      job.dependencies = dependencies;
      delete job.dependencies_omitted;
    }
  }

  /**
   * The handler's outcome if it ends within `seconds`; else its signal is aborted with a
   * `TimeoutError`, and after `timeoutGraceMs` more the attempt is a `Timeout` failure whether it
   * stopped or not (a handler that ignores its signal runs on, without its slot).
   */
  private async within<T>(entry: Running, running: Promise<T>, seconds: number): Promise<T | { ok: false; error: unknown }> {
    let timer: NodeJS.Timeout | undefined;
    const after = (ms: number): Promise<"late"> =>
      new Promise((resolve) => {
        timer = setTimeout(() => resolve("late"), ms);
      });
    try {
      const first = await Promise.race([running, after(seconds * 1000)]);
      if (first !== "late") return first;
      const error = new TimeoutError(seconds);
      entry.timedOut = true;
      abort(entry, error);
      clearTimeout(timer);
      await Promise.race([running, after(this.timeoutGraceMs)]);
      return { ok: false, error };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Ack a completed job with its handler's result: false when the lease was no longer ours. Batched,
   * one refused result refuses its whole batch, so each job of that batch then acks on its own,
   * where only the refused result is dropped.
   */
  private async ackCompleted(jid: string, lease: string, result: unknown): Promise<boolean> {
    if (this.acks !== undefined) {
      try {
        return await this.acks.ack(jid, lease, result);
      } catch (error) {
        if (!refusedBody(error)) throw error;
      }
    }
    await this.ackWithResult(jid, lease, result);
    return true;
  }

  /** Ack with the handler's result; a result the server refuses is dropped so the job does not run again. */
  private async ackWithResult(jid: string, lease: string, result: unknown): Promise<void> {
    try {
      await this.client.ack(jid, lease, result);
    } catch (error) {
      if (!refusedBody(error) || result === undefined) throw error;
      console.error(`werk: job ${jid}: the server refused its result (${error.code}); acking without it`);
      await this.client.ack(jid, lease);
    }
  }

  /** Stack lines a failure of `job` sends: the job's own `backtrace` (when > 0), within the worker's. */
  private maxLines(job: FetchedJob): number {
    return Math.min(job.backtrace || this.backtraceLines, this.backtraceLines);
  }

  private async settleFailure(entry: Running, report: FailReport): Promise<void> {
    this.failed++;
    const { jid, lease } = entry.job;
    let sent = sanitized(report);
    try {
      try {
        await this.persist(() => this.client.fail(jid, lease, sent));
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        // Never expected, as the report is within the server's limits; still, a recorded failure beats a lost one.
        sent = { ...sent, message: REFUSED_REPORT, backtrace: [] };
        await this.persist(() => this.client.fail(jid, lease, sent));
      }
    } catch (error) {
      this.reportSettleError(error, entry);
    }
  }

  /**
   * `send()`, tried again after a backoff while it fails for a reason retrying may fix: up to
   * SETTLE_TRIES tries, SETTLE_TRIES_STOPPING once the worker is stopping (a stop cuts a backoff
   * short). Each job waits on its own, so one job's retries hold up no other job's ack or fail.
   */
  private async persist<T>(send: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await send();
      } catch (error) {
        if (!retriable(error) || attempt >= (this.stopping ? SETTLE_TRIES_STOPPING : SETTLE_TRIES)) throw error;
        await this.backoff(Math.min(SETTLE_BACKOFF_CAP_MS, SETTLE_BACKOFF_MS * 2 ** (attempt - 1)));
        if (this.stopping && attempt >= SETTLE_TRIES_STOPPING) throw error;
      }
    }
  }

  private reportSettleError(error: unknown, entry: Running): void {
    if (error instanceof LeaseLost || error instanceof JobNotFound) {
      entry.lost = true; // the server gave the job to someone else (or it was deleted): not ours
      return;
    }
    this.onError(
      new WerkError(`could not settle job ${entry.job.jid}; the server will retry it when its lease expires`, {
        code: "settle_failed",
        cause: error,
      }),
      entry.job,
    );
  }

  /** Extend `entry`'s lease in `delayMs` (default: the regular interval), and again after each extension. */
  private scheduleExtend(entry: Running, delayMs = Math.max(EXTEND_MIN_MS, entry.job.reserve_for * 1000 * this.extendAt)): void {
    if (entry.finished || entry.settling) return;
    entry.extendTimer = setTimeout(() => {
      void this.extend(entry, undefined, false).then(
        (extended) => this.scheduleExtend(entry, extended ? undefined : Math.min(EXTEND_RETRY_MS, delayMs / 2)),
        () => undefined,
      );
    }, delayMs);
    entry.extendTimer.unref();
  }

  /** Resolves false when a regular extension failed for a reason retrying may fix. */
  private async extend(entry: Running, progress: unknown, withProgress: boolean): Promise<boolean> {
    if (entry.lost) throw new LeaseLost("the lease was lost", { code: "lease_lost", status: 409 });
    try {
      await this.client.extend(entry.job.jid, entry.job.lease, {
        reserve_for: entry.job.reserve_for,
        ...(withProgress ? { progress } : {}),
      });
      return true;
    } catch (error) {
      if (error instanceof LeaseLost || error instanceof JobNotFound) {
        entry.lost = true;
        abort(entry, error);
      } else if (!withProgress) {
        this.onError(error, entry.job);
        return false; // tried again soon: the lease may run out before the next interval
      }
      throw error;
    }
  }

  // -- shutdown ------------------------------------------------------------------------------

  /**
   * Waits for the running jobs until the shutdown deadline (which a later stop may move earlier),
   * fails the ones whose handler is still running, and waits for the acks and fails under way.
   */
  private async drain(): Promise<void> {
    while (this.running.size > 0 && Date.now() < this.deadline) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.waitForWake(), new Promise((r) => (timer = setTimeout(r, this.deadline - Date.now())))]);
      clearTimeout(timer);
    }
    const left = [...this.running].filter((entry) => !entry.settling);
    await Promise.all(
      left.map(async (entry) => {
        entry.settling = true;
        clearTimeout(entry.extendTimer);
        abort(entry, new Error("worker shutting down"));
        await this.settleFailure(entry, {
          errtype: "WorkerShutdown",
          message: `worker ${this.wid} shut down before the job finished`,
          backtrace: [],
          retry_in: this.shutdownRetryIn,
        });
        entry.finished = true;
        this.running.delete(entry);
        this.handled(entry);
      }),
    );
    // The others are being acked or failed, within their (shutdown) tries.
    while (this.running.size > 0) await this.waitForWake();
  }

  private wake(): void {
    for (const resolve of this.wakeResolvers.splice(0)) resolve();
  }

  private waitForWake(): Promise<void> {
    return new Promise((resolve) => this.wakeResolvers.push(resolve));
  }

  /** Sleep, cut short by stop(). */
  private pause(ms: number): Promise<void> {
    if (this.stopping) return Promise.resolve();
    return this.backoff(ms);
  }

  /** Sleep, cut short by the next stop() (also once stopping: a later stop shortens the grace). */
  private backoff(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.stopResolvers = this.stopResolvers.filter((r) => r !== done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.stopResolvers.push(done);
    });
  }
}

/** The signal a job's handler watches, made on first use; aborted already if the job was. */
function signalOf(entry: Running): AbortSignal {
  if (entry.controller === undefined) {
    entry.controller = new AbortController();
    if (entry.aborted !== undefined) entry.controller.abort(entry.aborted.reason);
  }
  return entry.controller.signal;
}

/** Abort a job's work (once): its signal, if anything asked for it yet, and any asked for later. */
function abort(entry: Running, reason: unknown): void {
  if (entry.aborted !== undefined) return;
  entry.aborted = { reason };
  entry.controller?.abort(reason);
}

/**
 * The failure report for what a handler threw, with at most `maxLines` lines of its stack. Never
 * throws: a handler may throw anything, including values that refuse to be converted or inspected.
 */
function describeFailure(error: unknown, maxLines: number): FailReport {
  try {
    return describe(error, maxLines);
  } catch {
    return { errtype: "unknown", message: UNDESCRIBABLE, backtrace: [] };
  }
}

function describe(error: unknown, maxLines: number): FailReport {
  if (error instanceof RetryIn || error instanceof NoRetry) {
    // Raised with a cause, they report the cause's type, message and stack.
    const subject = describe(error.cause instanceof Error ? error.cause : { ...plain(error, maxLines), errtype: error.name }, maxLines);
    const report: FailReport = { ...subject, errtype: error.errtype ?? subject.errtype };
    return error instanceof RetryIn ? { ...report, retry_in: error.seconds } : { ...report, retry: false };
  }
  if (error instanceof TimeoutError) return { errtype: TIMEOUT_ERRTYPE, message: error.message, backtrace: [] };
  if (error instanceof Error) return { ...plain(error, maxLines), errtype: error.name || "Error" };
  if (error !== null && typeof error === "object" && "errtype" in error) return error as FailReport;
  return { errtype: typeof error, message: text(error), backtrace: [] };
}

/** The message and the innermost `maxLines` lines of the stack (none when `maxLines` is not positive). */
function plain(error: Error, maxLines: number): { message: string; backtrace: string[] } {
  const lines = text(error.stack ?? "").split("\n").slice(1).map((l) => l.trim()).filter(Boolean);
  return { message: text(error.message), backtrace: maxLines > 0 ? lines.slice(0, maxLines) : [] };
}

const UNDESCRIBABLE = "(a value that cannot be converted to text)";

/** `value` as text: `String(value)`, else its JSON, else a fixed description (never throws). */
function text(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    return String(value);
  } catch {
    try {
      const json = JSON.stringify(value);
      if (typeof json === "string") return json;
    } catch {
      // fall through: nothing describes it
    }
    return UNDESCRIBABLE;
  }
}

// What the server takes of a failure report (errtype 200 characters, message 10,000, backtrace
// 1,000 lines of 10,000; no NUL, well-formed Unicode): a report it refused would be a failure
// never recorded, the job left to sit out its lease. Messages and lines are kept shorter, as the
// Python SDK keeps them: the start of a long message says what went wrong.
const MAX_ERRTYPE = 200;
const MAX_MESSAGE = 4000;
const MAX_LINES = 1000;
const MAX_LINE = 2000;
const RETRY_IN_MAX = 31_536_000;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** `value` as text of at most `limit` characters the server stores: NUL escaped, a lone surrogate replaced. */
function clean(value: unknown, limit: number): string {
  // Cut before replacing: a cut through a surrogate pair leaves a lone half.
  return text(value).replaceAll("\0", "\\x00").slice(0, limit).replace(LONE_SURROGATE, "\ufffd");
}

/** `report` within the server's limits, whatever a handler put in it (a thrown object's fields may be anything). */
function sanitized(report: FailReport): FailReport {
  try {
    const { errtype, message, retry_in, retry } = report;
    const backtrace: unknown = report.backtrace;
    const lines: unknown[] = Array.isArray(backtrace) ? backtrace : typeof backtrace === "string" ? backtrace.split("\n") : [];
    const out: FailReport = {
      errtype: clean(errtype ?? "", MAX_ERRTYPE) || "unknown",
      message: clean(message ?? "", MAX_MESSAGE),
      backtrace: lines.slice(0, MAX_LINES).map((line) => clean(line, MAX_LINE)),
    };
    if (typeof retry_in === "number" && Number.isFinite(retry_in)) out.retry_in = Math.min(RETRY_IN_MAX, Math.max(0, retry_in));
    if (retry === false) out.retry = false;
    return out;
  } catch {
    return { errtype: "unknown", message: UNDESCRIBABLE, backtrace: [] };
  }
}

/**
 * Whether an ack or fail that failed may succeed when sent again (an outage, a 500, a 429): not when
 * the lease is gone or the server refused what was sent.
 */
function retriable(error: unknown): boolean {
  return (
    error instanceof WerkError &&
    !(error instanceof LeaseLost || error instanceof JobNotFound || error instanceof ValidationError || error instanceof PayloadTooLarge)
  );
}

/** The server refused what an ack carried (a result too large or not storable, or a batch too big). */
function refusedBody(error: unknown): error is WerkError {
  return (
    error instanceof WerkError &&
    (error.code === "result_too_large" ||
      error.code === "invalid_request" ||
      error.code === "invalid_json" ||
      error.code === "payload_too_large")
  );
}

// A lone surrogate as JSON.stringify writes it (a \u escape whose backslash is not itself escaped):
// the server refuses such JSON (invalid_json).
const ESCAPED_LONE_SURROGATE = /(?<!\\)(?:\\\\)*\\ud[89a-f]/;

/**
 * A handler's return value as the job's result: only what JSON carries, as well-formed Unicode
 * (else undefined: none).
 */
function sendable(value: unknown): unknown {
  if (value === undefined || value === null) return undefined;
  try {
    const json = JSON.stringify(value);
    if (json === undefined) return undefined;
    return json.includes("\\ud") && ESCAPED_LONE_SURROGATE.test(json) ? undefined : value;
  } catch {
    return undefined;
  }
}
