import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Client, NoRetry, RetryIn, Worker, weightedOrder } from "../src/index.js";
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
