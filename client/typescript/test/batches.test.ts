import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { BatchClosed, BatchNotFound, Client } from "../src/index.js";
import { URL_, hangingUp, uniqueQueue } from "./helpers.js";

const client = new Client({ url: URL_ });

describe("batches", () => {
  it("commits after fill, finishes when its members complete and releases on_success once", async () => {
    const queue = uniqueQueue();
    const callbacks = uniqueQueue();
    const committed = await client.batch(
      { description: "ts", on_success: { jobtype: "done", queue: callbacks } },
      async (b) => {
        const first = await b.push({ jobtype: "t", queue });
        assert.equal(first.batch, b.bid);
        await b.pushMany([{ jobtype: "t", queue }, { jobtype: "t", queue }]);
      },
    );
    assert.equal(committed.state, "committed");
    assert.equal(committed.total, 3);
    assert.equal(committed.on_success?.state, "waiting");
    const late = await client.push({ jobtype: "t", queue, batch: committed.bid }).catch((e: unknown) => e);
    assert.ok(late instanceof BatchClosed && late.code === "batch_committed");
    const jobs = await client.fetch({ queues: [queue], wid: "ts-batch", count: 10 });
    await client.ackMany(jobs.map((j) => ({ jid: j.jid, lease: j.lease! })));
    const status = await client.batchStatus(committed.bid);
    assert.equal(status.state, "finished");
    assert.equal(status.succeeded, 3);
    const cbs = await client.fetch({ queues: [callbacks], wid: "ts-batch", count: 10 });
    assert.deepEqual(cbs.map((j) => j.jobtype), ["done"]);
    await assert.rejects(client.batchStatus("b-nosuchbatch-ts"), BatchNotFound);
  });

  it("lets a member add work to its own batch", async () => {
    const queue = uniqueQueue();
    const committed = await client.batch({}, async (b) => {
      await b.push({ jobtype: "split", queue });
    });
    const [split] = await client.fetch({ queues: [queue], wid: "ts-batch" });
    const again = await client.inBatch(split!.batch!, async (b) => {
      await b.push({ jobtype: "part", queue });
    });
    assert.equal(again.total, 2);
    await client.ack(split!.jid, split!.lease!);
    const [part] = await client.fetch({ queues: [queue], wid: "ts-batch" });
    await client.ack(part!.jid, part!.lease!);
    assert.equal((await client.batchStatus(committed.bid)).state, "finished");
  });
});

describe("child batches", () => {
  it("opens a child from a batch's handle, a member settled in its parent when it finishes", async () => {
    const queue = uniqueQueue();
    let child = "";
    const parent = await client.batch({}, async (b) => {
      await b.push({ jobtype: "t", queue });
      const opened = await b.batch({ description: "child" }, async (c) => {
        await c.push({ jobtype: "t", queue });
        assert.equal((await c.status()).state, "open");
      });
      child = opened.bid;
      assert.equal(opened.parent, b.bid);
      assert.equal((await b.status()).total, 2);
    });
    const jobs = await client.fetch({ queues: [queue], wid: "ts-batch", count: 10 });
    await client.ackMany(jobs.map((j) => ({ jid: j.jid, lease: j.lease! })));
    assert.equal((await client.batchStatus(child)).state, "finished");
    const status = await client.batchStatus(parent.bid);
    assert.equal(status.state, "finished");
    assert.equal(status.succeeded, 2);
  });
});

describe("batch creation after a lost answer", () => {
  it("is not sent again (it would open a second batch), while a push is", async () => {
    const server = await hangingUp();
    const lost = new Client({ url: server.url, retries: 2 });
    try {
      await assert.rejects(lost.createBatch({ description: "once" }));
      assert.equal(server.requests, 1);
      await assert.rejects(lost.push({ jobtype: "t" }));
      assert.equal(server.requests, 1 + 3);
    } finally {
      server.close();
    }
  });
});
