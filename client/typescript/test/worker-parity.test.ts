import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Client, NoRetry, RetryIn, Worker, weightedOrder, type Handler } from "../src/index.js";
import { URL_, eventually, sleep, uniqueQueue } from "./helpers.js";

const client = new Client({ url: URL_ });
const quietErrors = { onError: (e: unknown) => console.error("worker error:", e), handleSignals: false, url: URL_ };

async function failureOf(jid: string): Promise<{ errtype: string; message: string } | undefined> {
  const job = (await client.get(jid)) as { failure?: { errtype: string; message: string } | null };
  return job.failure ?? undefined;
}

describe("Worker timeouts", () => {
  it("aborts the handler's signal at its timeout and fails the attempt with Timeout", async () => {
    const queue = uniqueQueue();
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1, timeoutGraceMs: 500 });
    let reason: unknown;
    worker.register(
      "slow",
      (_args, { signal }) =>
        new Promise((resolve, reject) => {
          const timer = setTimeout(resolve, 30_000);
          signal.addEventListener("abort", () => {
            clearTimeout(timer);
            reason = signal.reason;
            reject(signal.reason);
          });
        }),
      { timeout: 0.4 },
    );
    const job = await client.push({ jobtype: "slow", queue, retry: 1 });
    const started = Date.now();
    const running = worker.run();
    await eventually(async () => (await failureOf(job.jid)) !== undefined, 15_000, "the timeout failure");
    worker.stop(0);
    await running;
    const failure = await failureOf(job.jid);
    assert.equal(failure?.errtype, "Timeout");
    assert.match(failure?.message ?? "", /0\.4s/);
    assert.equal((reason as Error).name, "Timeout");
    assert.ok(Date.now() - started < 10_000);
  });

  it("hands a handler that looks at its signal only after the timeout an aborted one", async () => {
    const queue = uniqueQueue();
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1, timeoutGraceMs: 1_000 });
    let seen: { aborted: boolean; reason: unknown } | undefined;
    worker.register(
      "late",
      async (_args, ctx) => {
        await sleep(500);
        seen = { aborted: ctx.signal.aborted, reason: ctx.signal.reason };
      },
      { timeout: 0.2 },
    );
    const job = await client.push({ jobtype: "late", queue, retry: 1 });
    const running = worker.run();
    await eventually(async () => (await failureOf(job.jid)) !== undefined, 15_000, "the timeout failure");
    worker.stop(0);
    await running;
    assert.equal((await failureOf(job.jid))?.errtype, "Timeout");
    assert.equal(seen?.aborted, true);
    assert.equal((seen?.reason as Error).name, "Timeout");
  });

  it("fails a handler that ignores its signal at timeout + grace and frees its slot", async () => {
    const queue = uniqueQueue();
    const worker = new Worker({ ...quietErrors, queues: [queue], concurrency: 1, fetchWait: 1, timeoutGraceMs: 300 });
    const done: string[] = [];
    worker.register("stubborn", () => sleep(5_000), { timeout: 0.3 });
    worker.register("next", () => void done.push("next"));
    const stubborn = await client.push({ jobtype: "stubborn", queue, retry: 1 });
    await client.push({ jobtype: "next", queue });
    const started = Date.now();
    const running = worker.run();
    await eventually(() => done.length === 1, 15_000, "the next job");
    const elapsed = Date.now() - started;
    worker.stop(0);
    await running;
    assert.equal((await failureOf(stubborn.jid))?.errtype, "Timeout");
    assert.ok(elapsed < 4_500, `the next job waited ${elapsed} ms`);
  });

  it("takes a job's custom.timeout over the handler's", async () => {
    const queue = uniqueQueue();
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1, timeoutGraceMs: 200 });
    worker.register("slow", () => sleep(3_000), { timeout: 60 });
    const job = await client.push({ jobtype: "slow", queue, retry: 1, custom: { timeout: 0.2 } });
    const running = worker.run();
    await eventually(async () => (await failureOf(job.jid)) !== undefined, 15_000, "the timeout failure");
    worker.stop(0);
    await running;
    assert.equal((await failureOf(job.jid))?.errtype, "Timeout");
  });

  it("refuses a timeout the job's reservation cannot cover", async () => {
    const worker = new Worker({ ...quietErrors });
    assert.throws(() => worker.register("x", () => undefined, { timeout: 0 }), /positive/);
    assert.throws(() => worker.register("x", () => undefined, { timeout: 7 * 86_400 }), /reserve_for/);
    await assert.rejects(client.push({ jobtype: "x", reserve_for: 60, custom: { timeout: 61 } }), /reserve_for \(60s\)/);
    await assert.rejects(client.pushMany([{ jobtype: "x", custom: { timeout: 3600 } }]), /reserve_for \(1800s\)/);
  });
});

describe("Worker middleware, hooks, RetryIn/NoRetry, weighted queues", () => {
  it("runs middleware around every job (first added outermost) and hooks at start and stop", async () => {
    const queue = uniqueQueue();
    const events: string[] = [];
    const worker = new Worker({
      ...quietErrors,
      queues: [queue],
      fetchWait: 1,
      middleware: [
        async (ctx, next) => {
          events.push(`outer-before ${ctx.job.jobtype}`);
          const value = await next();
          events.push(`outer-after ${String(value)}`);
          return value;
        },
      ],
    });
    worker.use(async (ctx, next) => {
      if (ctx.job.args[0] === "veto") throw new Error("vetoed by middleware");
      events.push("inner");
      return next();
    });
    worker.onStartup(() => void events.push("startup"));
    worker.onShutdown(async () => void events.push("shutdown"));
    worker.register("echo", (args) => {
      events.push("handler");
      return args[0];
    });
    const ok = await client.push({ jobtype: "echo", args: ["hi"], queue, keep_result_for: 60 });
    const vetoed = await client.push({ jobtype: "echo", args: ["veto"], queue, retry: 1 });
    const running = worker.run();
    await eventually(async () => (await failureOf(vetoed.jid)) !== undefined && worker.processed === 1, 15_000, "both jobs");
    worker.stop(0);
    await running;
    assert.equal((await client.result(ok.jid)).result, "hi");
    assert.equal((await failureOf(vetoed.jid))?.message, "vetoed by middleware");
    assert.equal(events[0], "startup");
    assert.equal(events.at(-1), "shutdown");
    const hi = events.indexOf("inner");
    assert.deepEqual(events.slice(hi - 1, hi + 3), ["outer-before echo", "inner", "handler", "outer-after hi"]);
  });

  it("RetryIn reschedules after the given seconds and NoRetry sends the job to the dead set", async () => {
    const queue = uniqueQueue();
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1 });
    worker.register("later", () => {
      throw new RetryIn(3600, "rate limited", { errtype: "RateLimited" });
    });
    worker.register("never", () => {
      throw new NoRetry("bad input", { cause: new TypeError("not a number") });
    });
    const later = await client.push({ jobtype: "later", queue });
    const never = await client.push({ jobtype: "never", queue });
    const running = worker.run();
    await eventually(
      async () => (await failureOf(later.jid)) !== undefined && (await failureOf(never.jid)) !== undefined,
      15_000,
      "both failures",
    );
    worker.stop(0);
    await running;
    const laterJob = (await client.get(later.jid)) as any;
    assert.equal(laterJob.state, "scheduled");
    assert.equal(laterJob.failure.errtype, "RateLimited");
    const delay = Date.parse(laterJob.failure.next_at) - Date.now();
    assert.ok(delay > 3000_000 && delay <= 3600_000, `retry in ${delay} ms`);
    const neverJob = (await client.get(never.jid)) as any;
    assert.equal(neverJob.state, "dead");
    assert.equal(neverJob.failure.errtype, "TypeError");
    assert.equal(neverJob.failure.message, "not a number");
  });

  it("orders queues by a weighted draw on every fetch, or strictly without weights", async () => {
    const firsts = new Map<string, number>();
    for (let i = 0; i < 20_000; i++) {
      const first = weightedOrder(["a", "b", "c"], { a: 6, b: 3 })[0]!;
      firsts.set(first, (firsts.get(first) ?? 0) + 1);
    }
    assert.ok(Math.abs(firsts.get("a")! / 20_000 - 0.6) < 0.03);
    assert.ok(Math.abs(firsts.get("c")! / 20_000 - 0.1) < 0.03);
    assert.throws(() => new Worker({ ...quietErrors, queues: ["a"], weights: { b: 2 } }), /not in queues/);
  });
});

describe("Worker shutdown and failure reports", () => {
  /** A handler that runs until its signal is aborted. */
  const untilAborted = (started: string[]): Handler => (_args, { job, signal }) =>
    new Promise<void>((resolve) => {
      started.push(job.jid);
      signal.addEventListener("abort", () => resolve(), { once: true });
    });

  it("fails a job still running after the shutdown grace with WorkerShutdown and retry_in 0: it is fetched again at once", async () => {
    const queue = uniqueQueue();
    const started: string[] = [];
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1 });
    worker.register("long", untilAborted(started));
    const job = await client.push({ jobtype: "long", queue, retry: 3 });
    const running = worker.run();
    await eventually(() => started.length === 1, 15_000, "the job to start");
    worker.stop(200);
    await running;
    assert.equal(worker.failed, 1);
    const left = (await client.get(job.jid)) as any;
    assert.equal(left.failure.errtype, "WorkerShutdown");
    assert.ok(left.state === "scheduled" || left.state === "available", left.state);
    assert.ok(left.failure.next_at === null || Date.parse(left.failure.next_at) - Date.now() < 5_000, left.failure.next_at);
    // The backoff of a first failure is 15 s or more: a retry this soon is retry_in 0.
    const [again] = await client.fetch({ queues: [queue], wid: "ts-shutdown", wait: 3 });
    assert.equal(again?.jid, job.jid);
    assert.equal(again?.attempt, 2);
  });

  it("retries a job failed at shutdown after shutdownRetryIn seconds", async () => {
    assert.throws(() => new Worker({ ...quietErrors, shutdownRetryIn: -1 }), /shutdownRetryIn/);
    const queue = uniqueQueue();
    const started: string[] = [];
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1, shutdownRetryIn: 3600 });
    worker.register("long", untilAborted(started));
    const job = await client.push({ jobtype: "long", queue, retry: 3 });
    const running = worker.run();
    await eventually(() => started.length === 1, 15_000, "the job to start");
    worker.terminate();
    await running;
    const left = (await client.get(job.jid)) as any;
    assert.equal(left.state, "scheduled");
    assert.equal(left.failure.errtype, "WorkerShutdown");
    const delay = Date.parse(left.failure.next_at) - Date.now();
    assert.ok(delay > 3500_000 && delay <= 3600_000, `retry in ${delay} ms`);
  });

  it("sends at most the job's backtrace lines of a failure's stack, within the worker's backtraceLines", async () => {
    const queue = uniqueQueue();
    const deep = (message: string): Error => {
      const error = new Error(message);
      error.stack = [`Error: ${message}`, ...Array.from({ length: 80 }, (_, i) => `    at frame${i} (handler.js:${i + 1}:1)`)].join("\n");
      return error;
    };
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1, backtraceLines: 20 });
    worker.register("boom", () => {
      throw deep("boom");
    });
    worker.register("never", () => {
      throw new NoRetry("gave up", { cause: deep("cause") });
    });
    const own = await client.push({ jobtype: "boom", queue, retry: 3, backtrace: 3 });
    const unset = await client.push({ jobtype: "boom", queue, retry: 3 });
    const wider = await client.push({ jobtype: "boom", queue, retry: 3, backtrace: 40 });
    const caused = await client.push({ jobtype: "never", queue, backtrace: 2 });
    const running = worker.run();
    await eventually(() => worker.failed === 4, 15_000, "four failures");
    worker.stop(); // the grace lets the fail requests in flight finish
    await running;
    const lines = async (jid: string): Promise<string[]> => (await client.get(jid)).failure?.backtrace ?? [];
    const frames = (n: number): string[] => Array.from({ length: n }, (_, i) => `at frame${i} (handler.js:${i + 1}:1)`);
    assert.deepEqual(await lines(own.jid), frames(3), "the job's backtrace");
    assert.deepEqual(await lines(unset.jid), frames(20), "no backtrace: the worker's backtraceLines");
    assert.deepEqual(await lines(wider.jid), frames(20), "the worker's backtraceLines bound the job's");
    assert.deepEqual(await lines(caused.jid), frames(2), "the cause's stack, by the job's backtrace");
    const defaults = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1 });
    defaults.register("boom", () => {
      throw deep("boom");
    });
    const plain = await client.push({ jobtype: "boom", queue, retry: 3 });
    const run = defaults.run();
    await eventually(() => defaults.failed === 1, 15_000, "the failure");
    defaults.stop();
    await run;
    assert.deepEqual(await lines(plain.jid), frames(50), "the default: 50 lines");
  });
});
