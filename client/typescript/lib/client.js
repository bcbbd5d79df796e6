import { randomFillSync } from "node:crypto";
import { Unavailable, WerkError, errorFromResponse } from "./errors.js";
import { Pool, TimedOut } from "./transport.js";
import { RawJobs, readPushed, withJobs } from "./pushed.js";
import { checkTimeout, customTimeout } from "./timeouts.js";
export const VERSION = "0.1.0";
/** Jobs per batch push / ack request (the server's default limit). */
export const MAX_BATCH = 1000;
/** Dependencies per page asked for when reading pages through: the server's largest `limit`, so
 * its budget of result bytes, not a count, ends a page. */
export const DEPENDENCY_PAGE_MAX = 1000;
/**
 * The jobs (each with a jid, so a retried push stores once) in requests of at most MAX_BATCH.
 * No jobs still make one (empty) request: the server's answer to it is the caller's.
 */
function jobBatches(jobs) {
    // One clock reading for the push, not one per job (a clock reading costs more than minting a
    // jid): its jids are minted as if in one millisecond, and still only grow.
    const now = Date.now();
    const all = jobs.map((job) => withJid(job, now));
    const batches = [];
    for (let start = 0; start < all.length || start === 0; start += MAX_BATCH) {
        batches.push(all.slice(start, start + MAX_BATCH));
        if (all.length === 0)
            break;
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
export function newJid() {
    return mintJid(Date.now());
}
/** `newJid` at the clock reading `ms`. */
function mintJid(ms) {
    if (Math.floor(minted.hi / 16) < ms) {
        if (randomUsed + 9 > randomPool.length) {
            randomFillSync(randomPool);
            randomUsed = 0;
        }
        minted.hi = ms * 16 + (randomPool[randomUsed] >> 4);
        minted.mid = randomPool.readUInt32BE(randomUsed + 1);
        minted.lo = randomPool.readUInt32BE(randomUsed + 5);
        randomUsed += 9;
    }
    else if (minted.lo < 0xffffffff) {
        minted.lo++;
        if ((minted.lo & 0xff) === 0)
            minted.stem = minted.prefix + hex(minted.lo >>> 8, 6);
        return minted.stem + BYTE_HEX[minted.lo & 0xff];
    }
    else {
        minted.lo = 0;
        if (minted.mid < 0xffffffff)
            minted.mid++;
        else {
            minted.mid = 0;
            minted.hi++;
        }
    }
    // In parts below 2^31: V8 prints a larger number in hex by a slow path.
    minted.prefix = hex(Math.floor(minted.hi / 0x1000000), 6) + hex(minted.hi % 0x1000000, 6)
        + hex(minted.mid >>> 16, 4) + hex(minted.mid & 0xffff, 4);
    minted.stem = minted.prefix + hex(minted.lo >>> 8, 6);
    return minted.stem + BYTE_HEX[minted.lo & 0xff];
}
function hex(value, digits) {
    return value.toString(16).padStart(digits, "0");
}
/** Sleep, cut short when `signal` aborts; its listener goes with the sleep (a worker's signal lives long). */
function sleep(ms, signal) {
    return new Promise((resolve) => {
        const onAbort = () => {
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
    url;
    prefix;
    timeoutMs;
    retries;
    // Its own HTTP/1.1 connections rather than node:http or the global fetch: a producer or worker
    // pays the transport's CPU on every push, fetch and ack, and both cost several times what the
    // request itself does (see transport.ts).
    pool;
    constructor(options = {}) {
        this.url = (options.url ?? process.env.WERK_URL ?? "http://127.0.0.1:7420").replace(/\/+$/, "");
        const token = options.token ?? process.env.WERK_TOKEN;
        const headers = {
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
    async push(job) {
        return (await this.send({ method: "POST", path: "/v1/jobs", body: withJid(job, Date.now()) }));
    }
    /**
     * Enqueue many jobs, 1,000 per request; each request is all-or-nothing (two jobs with one
     * unique key in a request are refused). A job whose unique key another job holds is answered
     * by the holder and listed in `conflicts`.
     */
    async pushMany(jobs) {
        const merged = { jids: [], created: 0, existed: [], jobs: [], conflicts: [], refs: {} };
        const pages = [];
        for (const chunk of jobBatches(jobs)) {
            const call = { method: "POST", path: "/v1/jobs/batch", body: { jobs: chunk }, read: readPushedJobs };
            const result = (await this.send(call));
            for (const c of result.conflicts ?? [])
                merged.conflicts.push({ ...c, index: c.index + merged.jids.length });
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
    async pushFlow(jobs) {
        if (jobs.length > MAX_BATCH)
            throw new RangeError(`a flow is pushed in one request: at most ${MAX_BATCH} jobs`);
        const now = Date.now();
        const body = { jobs: jobs.map((job) => withJid(job, now)) };
        const result = (await this.send({ method: "POST", path: "/v1/jobs/batch", body }));
        return { ...result, conflicts: result.conflicts ?? [], refs: result.refs ?? {} };
    }
    /** As `pushMany`, answered with the jids only (`Prefer: return=minimal`), not the stored jobs. */
    async pushJids(jobs) {
        const merged = { jids: [], created: 0, existed: [], conflicts: [], refs: {} };
        const headers = { prefer: "return=minimal" };
        for (const chunk of jobBatches(jobs)) {
            const body = { jobs: chunk };
            const result = (await this.send({ method: "POST", path: "/v1/jobs/batch", body, headers }));
            for (const c of result.conflicts ?? [])
                merged.conflicts.push({ ...c, index: c.index + merged.jids.length });
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
    async batch(spec, fill) {
        const opened = await this.createBatch(spec);
        await fill(this.handle(opened.bid));
        return this.commitBatch(opened.bid);
    }
    /** Open an existing batch again, run `fill`, commit: how a member job adds work to its batch. */
    async inBatch(bid, fill) {
        await this.reopenBatch(bid);
        await fill(this.handle(bid));
        return this.commitBatch(bid);
    }
    /** Open a new batch (`batch` wraps this, `fill` and the commit). */
    async createBatch(spec = {}) {
        const body = { ...spec };
        for (const kind of ["on_complete", "on_success", "on_death"]) {
            const job = spec[kind];
            if (job)
                body[kind] = withJid(job, Date.now());
        }
        // Not repeatable: a request whose answer was lost may have opened the batch, and sending it
        // again would open a second one.
        return (await this.send({ method: "POST", path: "/v1/batches", body, repeatable: false }));
    }
    /** Open a committed batch again; rejects with `BatchClosed` (`batch_finished`) once it finished. */
    async reopenBatch(bid) {
        return (await this.send({ method: "POST", path: `/v1/batches/${encodeURIComponent(bid)}/open`, body: {} }));
    }
    /** Commit the batch: it finishes once no member is pending. */
    async commitBatch(bid) {
        return (await this.send({ method: "POST", path: `/v1/batches/${encodeURIComponent(bid)}/commit`, body: {} }));
    }
    /** How the batch stands; rejects with `BatchNotFound`. */
    async batchStatus(bid) {
        return (await this.send({ method: "GET", path: `/v1/batches/${encodeURIComponent(bid)}` }));
    }
    handle(bid) {
        return {
            bid,
            push: (job) => this.push({ ...job, batch: bid }),
            pushMany: (jobs) => this.pushMany(jobs.map((job) => ({ ...job, batch: bid }))),
            batch: (spec, fill) => this.batch({ ...spec, parent: bid }, fill),
            status: () => this.batchStatus(bid),
        };
    }
    /** The job as stored; rejects with `JobNotFound` (completed jobs are deleted at ack). */
    async get(jid) {
        return (await this.send({ method: "GET", path: `/v1/jobs/${encodeURIComponent(jid)}` }));
    }
    /**
     * Every dependency of the job, in jid order, each with its result: all its dependency pages,
     * which carry the results a fetch or `get` left out (`result_omitted`). Rejects with
     * `JobNotFound` when the job is not stored.
     */
    async dependencies(jid, options = {}) {
        const all = [];
        let cursor = null;
        do {
            const page = await this.dependencyPage(jid, { cursor, limit: DEPENDENCY_PAGE_MAX }, options);
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
    async dependencyPage(jid, page = {}, options = {}) {
        const path = withQuery(`/v1/jobs/${encodeURIComponent(jid)}/dependencies`, page);
        return (await this.send({ method: "GET", path, signal: options.signal }));
    }
    /**
     * The job's outcome, waiting up to `wait` seconds (the server's long-poll limit applies) for it
     * to settle: `done` says whether it did. Rejects with `JobNotFound` when the job is not stored
     * (a job is deleted at ack unless pushed with `keep_result_for`).
     */
    async result(jid, options = {}) {
        const wait = Math.max(0, options.wait ?? 0);
        const query = wait > 0 ? `?wait=${wait}` : "";
        return (await this.send({
            method: "GET", path: `/v1/jobs/${encodeURIComponent(jid)}/result${query}`, extraMs: wait * 1000,
            signal: options.signal,
        }));
    }
    async info() {
        return (await this.send({ method: "GET", path: "/v1/info" }));
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
    async listJobs(filter = {}) {
        return (await this.send({ method: "GET", path: withQuery("/v1/jobs", filter) }));
    }
    /**
     * Run a dead, expired, skipped or scheduled job now; resolves with the job as stored. Rejects
     * with a `WerkError` coded `job_state_conflict` (409) for a job in another state.
     */
    async retryJob(jid) {
        return this.jobAction(jid, "retry");
    }
    /** Move a scheduled, available, waiting or active job to dead (an active one's worker loses its lease). */
    async killJob(jid) {
        return this.jobAction(jid, "kill");
    }
    /** Cancel a scheduled, available, waiting or active job: it will not run (again). */
    async cancelJob(jid) {
        return this.jobAction(jid, "cancel");
    }
    /** Delete the job, in any state; rejects with `JobNotFound` when none is stored. */
    async deleteJob(jid) {
        await this.send({ method: "DELETE", path: `/v1/jobs/${encodeURIComponent(jid)}`, repeatable: false });
    }
    /**
     * `retryJob` on every job matching `state`, `queue`, `jobtype`, `q` and `failed`, at most
     * `limit` (the server's default 1,000); `more` says jobs beyond it still match.
     */
    async retryJobs(filter = {}) {
        return this.bulk("retry", filter);
    }
    /** `killJob` on every matching job (filter as `retryJobs`). */
    async killJobs(filter = {}) {
        return this.bulk("kill", filter);
    }
    /** `cancelJob` on every matching job (filter as `retryJobs`). */
    async cancelJobs(filter = {}) {
        return this.bulk("cancel", filter);
    }
    /** Delete every matching job (filter as `retryJobs`). */
    async deleteJobs(filter = {}) {
        return this.bulk("delete", filter);
    }
    /** The queues: jobs available (`size`), the oldest one's wait, whether each is paused. */
    async listQueues() {
        return (await this.send({ method: "GET", path: "/v1/queues" })).queues;
    }
    /** The queue, with its jobs counted per state. */
    async queue(name) {
        return (await this.send({ method: "GET", path: `/v1/queues/${encodeURIComponent(name)}` }));
    }
    /** Stop handing out the queue's jobs; pushes are still accepted. */
    async pauseQueue(name) {
        return (await this.send({ method: "POST", path: `/v1/queues/${encodeURIComponent(name)}/pause` }));
    }
    async resumeQueue(name) {
        return (await this.send({ method: "POST", path: `/v1/queues/${encodeURIComponent(name)}/resume` }));
    }
    /** Delete the queue's available jobs; resolves with how many were deleted. */
    async clearQueue(name) {
        const path = `/v1/queues/${encodeURIComponent(name)}/jobs`;
        return (await this.send({ method: "DELETE", path, repeatable: false })).deleted;
    }
    /** The live worker processes (with `includeGone`, also those that stopped beating). */
    async listWorkers(options = {}) {
        const path = options.includeGone ? "/v1/workers?include_gone=true" : "/v1/workers";
        return (await this.send({ method: "GET", path })).workers;
    }
    /**
     * Ask the worker to stop fetching (it hears it at its next beat); resolves with its state.
     * Rejects with a `WerkError` coded `worker_not_found` (404) for a wid not live.
     */
    async quietWorker(wid) {
        return this.signal(`/v1/workers/${encodeURIComponent(wid)}/quiet`);
    }
    /** Ask the worker to shut down (at its next beat); resolves with its state. */
    async terminateWorker(wid) {
        return this.signal(`/v1/workers/${encodeURIComponent(wid)}/terminate`);
    }
    /** `quietWorker` for every live worker; resolves with how many were asked. */
    async quietWorkers() {
        return (await this.send({ method: "POST", path: "/v1/workers/quiet" })).changed;
    }
    /** `terminateWorker` for every live worker; resolves with how many were asked. */
    async terminateWorkers() {
        return (await this.send({ method: "POST", path: "/v1/workers/terminate" })).changed;
    }
    /** Jobs processed, failed and pushed per UTC day, oldest first: the last `days` (server default 30), one queue's or all. */
    async history(options = {}) {
        const path = withQuery("/v1/history", options);
        return (await this.send({ method: "GET", path })).days;
    }
    /** A page of the batches, newest first (`unfinished`: only those not finished); pass the page's `next` as `cursor`. */
    async listBatches(options = {}) {
        return (await this.send({ method: "GET", path: withQuery("/v1/batches", options) }));
    }
    async jobAction(jid, action) {
        const path = `/v1/jobs/${encodeURIComponent(jid)}/${action}`;
        return (await this.send({ method: "POST", path, repeatable: false }));
    }
    async bulk(action, filter) {
        const call = { method: "POST", path: `/v1/jobs/${action}`, body: given(filter), repeatable: false };
        return (await this.send(call));
    }
    async signal(path) {
        return (await this.send({ method: "POST", path })).state;
    }
    // -- worker side ---------------------------------------------------------------------------
    /** Lease up to `count` jobs from `queues` (in order), long-polling up to `wait` seconds. */
    async fetch(request, signal) {
        const body = { count: 1, wait: 0, ...request };
        const result = (await this.send({
            method: "POST", path: "/v1/fetch", body, extraMs: (body.wait ?? 0) * 1000, signal,
        }));
        return result.jobs;
    }
    /**
     * The attempt succeeded. `result` (JSON; undefined or null: none) is stored with a job pushed
     * with `keep_result_for`. Rejects with `LeaseLost` when the lease is not current, and with
     * `ResultTooLarge` (a `PayloadTooLarge`, code `result_too_large`) when the result exceeds the
     * server's limit; nothing is acked then.
     */
    async ack(jid, lease, result) {
        const body = result === undefined || result === null ? { lease } : { lease, result };
        await this.send({ method: "POST", path: `/v1/jobs/${encodeURIComponent(jid)}/ack`, body });
    }
    /** Ack many; jobs whose lease is not current are listed in `lease_lost`, not raised. */
    async ackMany(acks) {
        const merged = { acked: [], lease_lost: [] };
        for (let start = 0; start < acks.length; start += MAX_BATCH) {
            const chunk = acks.slice(start, start + MAX_BATCH);
            const result = (await this.send({ method: "POST", path: "/v1/ack", body: { acks: chunk } }));
            merged.acked.push(...result.acked);
            merged.lease_lost.push(...result.lease_lost);
        }
        return merged;
    }
    /** The attempt failed: the job retries after its backoff (or `retry_in`), or is dead. */
    async fail(jid, lease, report = {}) {
        return (await this.send({
            method: "POST", path: `/v1/jobs/${encodeURIComponent(jid)}/fail`, body: { lease, ...report },
        }));
    }
    /** Push the lease's expiry forward, optionally recording a progress checkpoint. */
    async extend(jid, lease, options = {}) {
        return (await this.send({
            method: "POST", path: `/v1/jobs/${encodeURIComponent(jid)}/extend`, body: { lease, ...options },
        }));
    }
    /** A worker process's heartbeat; the answer is `running`, `quiet` or `terminate`. */
    async beat(beat) {
        const reply = (await this.send({ method: "POST", path: "/v1/beat", body: beat }));
        return reply.state;
    }
    // -- transport -----------------------------------------------------------------------------
    async send(call) {
        for (let attempt = 0;; attempt++) {
            try {
                return await this.once(call);
            }
            catch (error) {
                const transient = error instanceof Unavailable;
                if (!transient || attempt >= this.retries || call.signal?.aborted)
                    throw error;
                if (call.repeatable === false && error.code === "unreachable" && !neverSent(error))
                    throw error;
                const delay = Math.min(2000, 100 * 2 ** attempt) * (0.5 + Math.random() / 2);
                await sleep(Math.max(delay, (error.retryAfter ?? 0) * 1000), call.signal);
            }
        }
    }
    async once(call) {
        let answer;
        try {
            const payload = call.body === undefined ? undefined : JSON.stringify(call.body);
            answer = await this.pool.request(call.method, this.prefix + call.path, payload, call.headers, this.timeoutMs + (call.extraMs ?? 0), call.signal);
        }
        catch (cause) {
            if (call.signal?.aborted)
                throw new WerkError("the request was aborted", { code: "aborted", cause });
            const what = cause instanceof TimedOut ? "timed out" : "failed";
            throw new Unavailable(`${call.method} ${call.path} ${what}: ${String(cause)}`, { code: "unreachable", cause });
        }
        if (answer.status >= 200 && answer.status < 300)
            return (call.read ?? readJson)(answer.body);
        const retryAfter = Number(answer.retryAfter) || undefined;
        throw errorFromResponse(answer.status, readJson(answer.body), retryAfter);
    }
}
/** `job` with a jid: itself when it has one, else a copy given a new one (minted at `now`). */
function withJid(job, now) {
    const timeout = customTimeout(job.custom);
    if (timeout !== undefined)
        checkTimeout(timeout, job.reserve_for ?? undefined, `job ${JSON.stringify(job.jobtype)}`);
    // Object.assign, not a spread: V8 takes a slow path for a spread copy with a property added
    // after it, and this runs once per job of a batch.
    return job.jid ? job : Object.assign({}, job, { jid: mintJid(now) });
}
/** A batch push's answer, its jobs left as bytes (`RawJobs`) unless its layout is not the expected one. */
function readPushedJobs(body) {
    return readPushed(body) ?? readJson(body);
}
/** An answer's body as JSON; the text itself when it is not JSON, null when there is none. */
function readJson(body) {
    if (body.length === 0)
        return null;
    const text = (body.length === 1 ? body[0] : Buffer.concat(body)).toString("utf8");
    try {
        return JSON.parse(text);
    }
    catch {
        return text;
    }
}
/** The entries given (neither undefined nor null): a request names only the filters set. */
function given(params) {
    return Object.fromEntries(Object.entries(params).filter(([, value]) => value !== undefined && value !== null));
}
/** `path` with the parameters given as its query (booleans as `true`/`false`). */
function withQuery(path, params) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(given(params)))
        query.append(name, String(value));
    const text = query.toString();
    return text ? `${path}?${text}` : path;
}
/** The request failed before a connection existed, so the server saw nothing of it. */
function neverSent(error) {
    return error.cause?.code === "ECONNREFUSED";
}
