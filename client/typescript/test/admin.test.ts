// The admin API beyond what client/contract/scenarios/admin.json replays: paging, encoding, the
// signals to every worker, and which admin requests are sent again after a lost answer.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer as createHttpServer } from "node:http";
import { describe, it } from "node:test";

import { Client, JobNotFound, WerkError } from "../src/index.js";
import { URL_, hangingUp, uniqueQueue } from "./helpers.js";

const client = new Client({ url: URL_ });
const FAR = "2999-01-01T00:00:00Z";

describe("admin: jobs", () => {
  it("lists jobs a page at a time, following next_cursor, in either order and by filter", async () => {
    const queue = uniqueQueue();
    const pushed = [];
    for (let i = 0; i < 5; i++) pushed.push((await client.push({ jobtype: "page", args: [i], queue })).jid);
    const needle = await client.push({ jobtype: "other", args: ["needle"], queue, at: FAR });

    const seen: string[] = [];
    let cursor: string | null | undefined;
    for (let pages = 1; ; pages++) {
      const page = await client.listJobs({ queue, state: "available", order: "oldest", limit: 2, cursor });
      assert.ok(page.jobs.length <= 2);
      seen.push(...page.jobs.map((j) => j.jid));
      cursor = page.next_cursor;
      if (cursor === null) break;
      assert.ok(pages < 5, "paging does not end");
    }
    assert.deepEqual(seen, pushed);
    const newest = await client.listJobs({ queue, state: "available", limit: 500 });
    assert.deepEqual(newest.jobs.map((j) => j.jid), [...pushed].reverse());
    assert.equal(newest.next_cursor, null);

    assert.deepEqual((await client.listJobs({ queue, jobtype: "other" })).jobs.map((j) => j.jid), [needle.jid]);
    assert.deepEqual((await client.listJobs({ queue, q: "needle" })).jobs.map((j) => j.jid), [needle.jid]);
    assert.deepEqual((await client.listJobs({ queue, failed: true })).jobs, []);
    assert.equal((await client.listJobs({ queue, failed: false })).jobs.length, 6);
  });

  it("acts on jobs in bulk at most `limit` at a time, saying when more match", async () => {
    const queue = uniqueQueue();
    await client.pushMany(Array.from({ length: 3 }, () => ({ jobtype: "bulk", queue, at: FAR })));
    assert.deepEqual(await client.killJobs({ queue, state: "scheduled", limit: 2 }), { action: "kill", changed: 2, more: true });
    assert.deepEqual(await client.killJobs({ queue, state: "scheduled", limit: 2 }), { action: "kill", changed: 1, more: false });
    assert.deepEqual(await client.retryJobs({ queue, state: "dead", jobtype: "bulk" }), { action: "retry", changed: 3, more: false });
    assert.deepEqual(await client.cancelJobs({ queue }), { action: "cancel", changed: 3, more: false });
    assert.deepEqual(await client.deleteJobs({ queue, state: "cancelled" }), { action: "delete", changed: 3, more: false });
    assert.deepEqual((await client.listJobs({ queue })).jobs, []);
  });

  it("encodes the jid in the path (':', '@', '+' and '=' are allowed in a jid)", async () => {
    const jid = `ts:${randomBytes(4).toString("hex")}@a+b=c`;
    const queue = uniqueQueue();
    await client.push({ jid, jobtype: "t", queue, at: FAR });
    assert.equal((await client.killJob(jid)).state, "dead");
    assert.equal((await client.retryJob(jid)).state, "available");
    assert.equal((await client.cancelJob(jid)).state, "cancelled");
    const conflict = await client.cancelJob(jid).catch((e: unknown) => e);
    assert.ok(conflict instanceof WerkError && conflict.code === "job_state_conflict" && conflict.status === 409);
    await client.deleteJob(jid);
    await assert.rejects(client.get(jid), JobNotFound);
    await assert.rejects(client.deleteJob(jid), JobNotFound);
  });
});

describe("admin: queues", () => {
  it("reads, pauses, resumes and clears a queue", async () => {
    const queue = uniqueQueue();
    await client.pushMany([{ jobtype: "t", queue }, { jobtype: "t", queue }, { jobtype: "t", queue, at: FAR }]);
    const listed = (await client.listQueues()).find((q) => q.name === queue);
    assert.equal(listed?.size, 2);
    assert.equal((await client.pauseQueue(queue)).paused, true);
    assert.deepEqual(await client.fetch({ queues: [queue], wid: "ts-admin" }), []);
    const detail = await client.resumeQueue(queue);
    assert.deepEqual([detail.paused, detail.size, detail.counts], [false, 2, { available: 2, scheduled: 1 }]);
    assert.equal(await client.clearQueue(queue), 2);
    assert.deepEqual((await client.queue(queue)).counts, { scheduled: 1 });
  });
});

describe("admin: workers", () => {
  it("encodes the wid in the path", async () => {
    const wid = `ts admin+${randomBytes(4).toString("hex")}%?#é`;
    await client.beat({ wid });
    assert.equal(await client.quietWorker(wid), "quiet");
    assert.equal((await client.listWorkers()).find((w) => w.wid === wid)?.state, "quiet");
    assert.equal(await client.terminateWorker(wid), "terminate");
    const missing = await client.quietWorker(`${wid}-nobody`).catch((e: unknown) => e);
    assert.ok(missing instanceof WerkError && missing.code === "worker_not_found" && missing.status === 404);
  });

  // These act on every live worker of the server: only this test's own workers are asserted on.
  it("quiets and terminates every live worker", async () => {
    const wids = [0, 1].map((i) => `ts-all-${randomBytes(4).toString("hex")}-${i}`);
    for (const wid of wids) assert.equal(await client.beat({ wid }), "running");
    assert.ok((await client.quietWorkers()) >= wids.length);
    const states = async (): Promise<unknown[]> => {
      const workers = await client.listWorkers();
      return wids.map((wid) => workers.find((w) => w.wid === wid)?.state);
    };
    assert.deepEqual(await states(), ["quiet", "quiet"]);
    for (const wid of wids) assert.equal(await client.beat({ wid }), "quiet");
    assert.ok((await client.terminateWorkers()) >= wids.length);
    assert.deepEqual(await states(), ["terminate", "terminate"]);
    for (const wid of wids) assert.equal(await client.beat({ wid }), "terminate");
    await client.quietWorkers(); // a worker's state only moves forward
    assert.deepEqual(await states(), ["terminate", "terminate"]);
  });

  it("lists gone workers only with includeGone", async () => {
    const wid = `ts-gone-${randomBytes(4).toString("hex")}`;
    await client.beat({ wid });
    assert.ok((await client.listWorkers({ includeGone: true })).some((w) => w.wid === wid && w.gone_at === null));
    // A worker is gone only after the server's worker timeout without a beat: the request is
    // checked against a server that records it.
    const targets = await recorded(async (local) => {
      await local.listWorkers();
      await local.listWorkers({ includeGone: false });
      await local.listWorkers({ includeGone: true });
    }, '{"workers": []}');
    assert.deepEqual(targets, ["GET /v1/workers", "GET /v1/workers", "GET /v1/workers?include_gone=true"]);
  });
});

describe("admin: history and batches", () => {
  it("counts a queue's pushes per day", async () => {
    const queue = uniqueQueue();
    await client.pushMany([{ jobtype: "t", queue }, { jobtype: "t", queue }]);
    const days = await client.history({ days: 2, queue });
    assert.equal(days.length, 2);
    assert.deepEqual(days.map((d) => d.pushed), [0, 2]);
    assert.match(days[1]!.day, /^\d{4}-\d\d-\d\d$/);
  });

  it("lists batches a page at a time", async () => {
    const first = await client.createBatch({ description: "ts-admin" });
    const second = await client.createBatch({ description: "ts-admin" });
    const seen: string[] = [];
    let cursor: string | null | undefined;
    // Newest first: both are found within the first pages unless many batches are opened meanwhile.
    for (let pages = 0; pages < 20 && cursor !== null; pages++) {
      const page = await client.listBatches({ limit: 1, cursor, unfinished: true });
      assert.ok(page.batches.length <= 1);
      seen.push(...page.batches.map((b) => b.bid));
      if (seen.includes(first.bid)) break;
      cursor = page.next;
    }
    assert.ok(seen.indexOf(second.bid) >= 0 && seen.indexOf(second.bid) < seen.indexOf(first.bid), JSON.stringify(seen));
  });
});

describe("admin: the request", () => {
  it("carries only the filters given, booleans as true/false", async () => {
    const targets = await recorded(async (local) => {
      await local.listJobs();
      await local.listJobs({ queue: "a b", failed: false, cursor: undefined, q: null, limit: 5 });
      await local.history();
      await local.history({ days: 7 });
      await local.listBatches({ unfinished: true, limit: 2 });
    }, "{}");
    assert.deepEqual(targets, [
      "GET /v1/jobs",
      "GET /v1/jobs?queue=a+b&failed=false&limit=5",
      "GET /v1/history",
      "GET /v1/history?days=7",
      "GET /v1/batches?unfinished=true&limit=2",
    ]);
    const bodies = await recorded(async (local) => {
      await local.retryJobs();
      await local.deleteJobs({ state: "dead", failed: true, jobtype: undefined, limit: 10 });
    }, '{"action": "retry", "changed": 0, "more": false}', true);
    assert.deepEqual(bodies, ["POST /v1/jobs/retry {}", 'POST /v1/jobs/delete {"state":"dead","failed":true,"limit":10}']);
  });

  it("sends job actions, bulk actions and clears once after a lost answer; reads, pauses and signals again", async () => {
    const server = await hangingUp();
    const lost = new Client({ url: server.url, retries: 2 });
    const sent = async (call: () => Promise<unknown>): Promise<number> => {
      const before = server.requests;
      await assert.rejects(call());
      return server.requests - before;
    };
    try {
      for (const once of [
        () => lost.retryJob("j"), () => lost.killJob("j"), () => lost.cancelJob("j"), () => lost.deleteJob("j"),
        () => lost.retryJobs(), () => lost.killJobs(), () => lost.cancelJobs(), () => lost.deleteJobs(),
        () => lost.clearQueue("q"),
      ]) assert.equal(await sent(once), 1, String(once));
      for (const again of [
        () => lost.listJobs(), () => lost.pauseQueue("q"), () => lost.resumeQueue("q"), () => lost.quietWorker("w"),
        () => lost.terminateWorkers(), () => lost.history(),
      ]) assert.equal(await sent(again), 3, String(again));
    } finally {
      server.close();
    }
  });
});

/** The requests `calls` makes to a local server answering each with `answer` ("METHOD target", and the body with `withBody`). */
async function recorded(calls: (local: Client) => Promise<void>, answer: string, withBody = false): Promise<string[]> {
  const seen: string[] = [];
  const server = createHttpServer((request, response) => {
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => {
      seen.push(`${request.method} ${request.url}${withBody ? ` ${body}` : ""}`);
      response.writeHead(200, { "content-type": "application/json" }).end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  try {
    await calls(new Client({ url: `http://127.0.0.1:${port}` }));
  } finally {
    server.close();
  }
  return seen;
}
