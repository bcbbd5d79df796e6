import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Client, JobNotFound, Worker } from "../src/index.js";
import { URL_, sleep, uniqueQueue } from "./helpers.js";

const client = new Client({ url: URL_ });

describe("Job results", () => {
  it("acks with a result and reads it back, waiting for it", async () => {
    const queue = uniqueQueue();
    const pushed = await client.push({ jobtype: "report", queue, keep_result_for: 60 });
    assert.equal(pushed.keep_result_for, 60);
    const [job] = await client.fetch({ queues: [queue], wid: "ts-results" });
    const pending = await client.result(pushed.jid);
    assert.equal(pending.done, false);
    const waiting = client.result(pushed.jid, { wait: 20 });
    await sleep(200);
    const started = Date.now();
    await client.ack(job!.jid, job!.lease!, { rows: [1, 2] });
    const got = await waiting;
    assert.ok(Date.now() - started < 500, `answered ${Date.now() - started} ms after the ack`);
    assert.equal(got.done, true);
    assert.equal(got.state, "completed");
    assert.deepEqual(got.result, { rows: [1, 2] });
    assert.ok(got.completed_at);
    const stored = await client.get(pushed.jid);
    assert.deepEqual(stored.result, { rows: [1, 2] });
  });

  it("stores batch ack results, and a job without keep_result_for is gone", async () => {
    const queue = uniqueQueue();
    const kept = await client.push({ jobtype: "report", queue, keep_result_for: 60 });
    const gone = await client.push({ jobtype: "report", queue });
    const jobs = await client.fetch({ queues: [queue], wid: "ts-results", count: 2 });
    await client.ackMany(jobs.map((j) => ({ jid: j.jid, lease: j.lease!, result: `r-${j.jid}` })));
    assert.equal((await client.result(kept.jid)).result, `r-${kept.jid}`);
    await assert.rejects(client.result(gone.jid), JobNotFound);
  });

  it("sends a handler's return value as its result", async () => {
    const queue = uniqueQueue();
    const job = await client.push({ jobtype: "double", args: [21], queue, keep_result_for: 60 });
    const plain = await client.push({ jobtype: "nothing", queue, keep_result_for: 60 });
    const worker = new Worker({ url: URL_, queues: [queue], fetchWait: 1, handleSignals: false });
    worker.register("double", async (args) => ({ answer: (args[0] as number) * 2 }));
    worker.register("nothing", () => undefined);
    const running = worker.run();
    const got = await client.result(job.jid, { wait: 20 });
    const none = await client.result(plain.jid, { wait: 20 });
    worker.stop();
    await running;
    assert.deepEqual(got.result, { answer: 42 });
    assert.equal(none.state, "completed");
    assert.equal(none.result, null);
  });

  it("carries each handler's result in batched acks, and drops only a result the server refuses", async () => {
    const queue = uniqueQueue();
    const pushed = await client.pushMany(
      Array.from({ length: 30 }, (_, i) => ({ jobtype: "report", args: [i], queue, keep_result_for: 60 })),
    );
    const own = new Client({ url: URL_ });
    const sent = { batches: 0, single: 0 };
    const ack = own.ack.bind(own);
    const ackMany = own.ackMany.bind(own);
    own.ack = (jid, lease, result) => (sent.single++, ack(jid, lease, result));
    own.ackMany = (acks) => (sent.batches++, ackMany(acks));
    const errors: unknown[] = [];
    const worker = new Worker({ client: own, queues: [queue], concurrency: 30, fetchWait: 1, handleSignals: false, onError: (e) => errors.push(e) });
    // Job 7's result is over the server's result limit (64 KiB): refused, so its job completes without it.
    worker.register("report", (args) => (args[0] === 7 ? "x".repeat(70_000) : { n: args[0] }));
    const running = worker.run();
    const results = await Promise.all(pushed.jobs.map((job) => client.result(job.jid, { wait: 20 })));
    worker.stop();
    await running;
    assert.deepEqual(errors, []);
    assert.ok(sent.batches > 0, "acked in batches");
    results.forEach((got, i) => {
      assert.equal(got.state, "completed", `job ${i}`);
      assert.deepEqual(got.result, i === 7 ? null : { n: i }, `job ${i}`);
    });
    assert.equal(worker.processed, 30);
  });
});
