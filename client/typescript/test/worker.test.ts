import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { Client, JobNotFound, LeaseLost, Worker } from "../src/index.js";
import { URL_, eventually, sleep, uniqueQueue } from "./helpers.js";

const client = new Client({ url: URL_ });
const quietErrors = { onError: (e: unknown) => console.error("worker error:", e), handleSignals: false, url: URL_ };

describe("Worker", () => {
  it("runs handlers with bounded concurrency, fetching in batches, and acks", async () => {
    const queue = uniqueQueue();
    await client.pushMany(Array.from({ length: 24 }, (_, i) => ({ jobtype: "work", args: [i], queue })));
    let active = 0;
    let peak = 0;
    const seen: number[] = [];
    const worker = new Worker({ ...quietErrors, queues: [queue], concurrency: 6, fetchWait: 1 });
    worker.register("work", async (args) => {
      active++;
      peak = Math.max(peak, active);
      await sleep(40);
      seen.push(args[0] as number);
      active--;
    });
    const running = worker.run();
    await eventually(() => seen.length === 24, 20_000, "24 jobs");
    worker.stop();
    await running;
    assert.deepEqual([...seen].sort((a, b) => a - b), Array.from({ length: 24 }, (_, i) => i));
    assert.ok(peak <= 6 && peak > 1, `peak concurrency ${peak}`);
    assert.equal(worker.processed, 24);
    assert.equal((await client.fetch({ queues: [queue], wid: "probe" })).length, 0);
  });

  it("acks jobs that complete together in one request, and each only once the server confirmed it", async () => {
    const queue = uniqueQueue();
    await client.pushMany(Array.from({ length: 60 }, (_, i) => ({ jobtype: "noop", args: [i], queue })));
    const own = new Client({ url: URL_ });
    const requests = { single: 0, batch: 0, acked: 0 };
    const ack = own.ack.bind(own);
    const ackMany = own.ackMany.bind(own);
    own.ack = (jid, lease) => (requests.single++, ack(jid, lease));
    own.ackMany = async (acks) => {
      requests.batch++;
      const result = await ackMany(acks);
      requests.acked += result.acked.length;
      return result;
    };
    const worker = new Worker({ ...quietErrors, client: own, queues: [queue], concurrency: 60, fetchWait: 1 });
    worker.register("noop", () => undefined);
    const running = worker.run();
    await eventually(() => worker.processed === 60, 20_000, "60 jobs acked");
    worker.stop();
    await running;
    assert.equal(requests.single, 0);
    assert.equal(requests.acked, 60, "processed counts only what the server confirmed");
    assert.ok(requests.batch < 60, `${requests.batch} ack requests for 60 jobs`);
    assert.equal((await client.fetch({ queues: [queue], wid: "probe" })).length, 0);
  });

  it("acks one request per job with batchAck false", async () => {
    const queue = uniqueQueue();
    await client.pushMany(Array.from({ length: 5 }, (_, i) => ({ jobtype: "noop", args: [i], queue })));
    const own = new Client({ url: URL_ });
    let single = 0;
    const ack = own.ack.bind(own);
    own.ack = (jid, lease) => (single++, ack(jid, lease));
    const worker = new Worker({ ...quietErrors, client: own, batchAck: false, queues: [queue], fetchWait: 1 });
    worker.register("noop", () => undefined);
    const running = worker.run();
    await eventually(() => worker.processed === 5, 20_000, "5 jobs acked");
    worker.stop();
    await running;
    assert.equal(single, 5);
  });

  it("fails a job whose handler throws, with the error's type, message and backtrace", async () => {
    const queue = uniqueQueue();
    const job = await client.push({ jobtype: "boom", queue, retry: 3 });
    const unknown = await client.push({ jobtype: "nobody-handles-this", queue });
    class PaymentDeclined extends Error {
      override name = "PaymentDeclined";
    }
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1 });
    worker.register("boom", () => {
      throw new PaymentDeclined("card 4242 declined");
    });
    const running = worker.run();
    await eventually(() => worker.failed === 2, 15_000, "two failures");
    worker.stop();
    await running;
    const stored = await client.get(job.jid);
    assert.equal(stored.state, "scheduled");
    assert.equal(stored.failure?.errtype, "PaymentDeclined");
    assert.equal(stored.failure?.message, "card 4242 declined");
    assert.ok((stored.failure?.backtrace.length ?? 0) > 0);
    assert.equal((await client.get(unknown.jid)).failure?.errtype, "UnknownJobType");
  });

  it("extends the lease of a long job automatically, and checkpoints progress", async () => {
    const queue = uniqueQueue();
    const job = await client.push({ jobtype: "long", queue, reserve_for: 60 });
    const expiries: string[] = [];
    // extendAt 0.02 of 60 s: an extension every 1.2 s.
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1, extendAt: 0.02 });
    worker.register("long", async (_args, ctx) => {
      expiries.push(ctx.job.lease_expires_at!);
      await ctx.checkpoint({ rows: 10 });
      await sleep(2600);
      expiries.push((await client.get(ctx.job.jid)).lease_expires_at!);
    });
    const running = worker.run();
    await eventually(() => worker.processed === 1, 15_000, "the long job");
    worker.stop();
    await running;
    const [first, last] = expiries.map((t) => Date.parse(t));
    assert.ok(last! - first! >= 2000, `lease moved by ${last! - first!} ms`);
    await assert.rejects(client.get(job.jid), JobNotFound);
  });

  it("gives a job up when its lease is lost (an operator killed it): no ack, the handler is aborted", async () => {
    const queue = uniqueQueue();
    const job = await client.push({ jobtype: "victim", queue });
    let started = false;
    let finished = false;
    let checkpointError: unknown;
    let aborted = false;
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1 });
    worker.register("victim", async (_args, ctx) => {
      started = true;
      await eventually(async () => (await client.get(ctx.job.jid)).state === "dead", 10_000, "the kill");
      checkpointError = await ctx.checkpoint({ n: 1 }).catch((e: unknown) => e);
      aborted = ctx.signal.aborted;
      finished = true;
    });
    const running = worker.run();
    await eventually(() => started, 10_000, "the job to start");
    await client.killJob(job.jid);
    await eventually(() => finished && worker.runningJids.length === 0, 15_000, "the handler to end");
    worker.stop();
    await running;
    assert.ok(checkpointError instanceof LeaseLost, String(checkpointError));
    assert.ok(aborted);
    assert.equal(worker.processed, 0);
    assert.equal((await client.get(job.jid)).failure?.errtype, "Killed"); // untouched by the worker
  });

  it("obeys quiet and terminate from the server", async () => {
    const queue = uniqueQueue();
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1, beatIntervalMs: 100 });
    let ran = 0;
    worker.register("x", () => void ran++);
    const running = worker.run();
    await eventually(async () => {
      try {
        await client.quietWorker(worker.wid);
        return true;
      } catch {
        return false;
      }
    }, 10_000, "the worker to register");
    await eventually(() => worker.state === "quiet", 20_000, "quiet");
    await sleep(1200); // any long poll in flight ends
    await client.push({ jobtype: "x", queue });
    await sleep(600);
    assert.equal(ran, 0, "a quiet worker fetches nothing");
    await client.terminateWorker(worker.wid);
    await running; // resolves: terminate stops the worker
    assert.equal(worker.state, "terminate");
  });

  it("shuts down gracefully on SIGTERM: finishes what fits in the grace period, fails the rest", async () => {
    const queue = uniqueQueue();
    const out = join(mkdtempSync(join(tmpdir(), "werk-ts-")), "out.jsonl");
    const script = fileURLToPath(new URL("./fixtures/worker-process.js", import.meta.url));
    const child = spawn(process.execPath, [script], {
      env: { ...process.env, WERK_URL: URL_, QUEUE: queue, OUT: out, GRACE_MS: "1500" },
      stdio: "inherit",
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const lines = (): any[] => (existsSync(out) ? readFileSync(out, "utf8").trim().split("\n").map((l) => JSON.parse(l)) : []);
    const fast = await client.push({ jobtype: "sleep", args: [500], queue });
    const slow = await client.push({ jobtype: "sleep", args: [20_000], queue });
    await eventually(() => lines().filter((l) => l.event === "started").length === 2, 15_000, "both jobs started");
    child.kill("SIGTERM");
    assert.equal(await exited, 0);
    assert.ok(lines().some((l) => l.event === "done" && l.jid === fast.jid));
    await assert.rejects(client.get(fast.jid), JobNotFound); // acked
    const left = await client.get(slow.jid);
    assert.ok(left.state === "scheduled" || left.state === "available", left.state); // failed, so it retries elsewhere
    assert.equal(left.failure?.errtype, "WorkerShutdown");
    const next = left.failure?.next_at;
    assert.ok(next == null || Date.parse(next) - Date.now() < 5_000, `retries at ${next}`); // at once: retry_in 0
    assert.deepEqual(lines().at(-1), { event: "exit", processed: 1, failed: 1 });
  });
});
