import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Client, JobNotFound, newJid, LeaseLost, NotUnique, Unavailable, ValidationError, WerkError, type JobPush } from "../src/index.js";
import { URL_, uniqueQueue } from "./helpers.js";

const client = new Client({ url: URL_ });

describe("Client", () => {
  it("mints jids that grow and never repeat", () => {
    const jids = Array.from({ length: 5000 }, () => newJid());
    assert.ok(jids.every((jid, i) => /^[0-9a-f]{28}$/.test(jid) && (i === 0 || jid > (jids[i - 1] ?? ""))));
    assert.equal(new Set(jids).size, jids.length);
  });

  it("pushes, fetches, extends, acks", async () => {
    const queue = uniqueQueue();
    const pushed = await client.push({ jobtype: "resize", args: [1, "a"], queue, custom: { from: "ts" } });
    assert.equal(pushed.state, "available");
    assert.equal(pushed.jid.length, 28); // assigned by the client, so a retried push stores one job
    const [job] = await client.fetch({ queues: [queue], wid: "ts-client", count: 10 });
    assert.ok(job?.lease);
    assert.deepEqual(job.args, [1, "a"]);
    const extended = await client.extend(job.jid, job.lease, { reserve_for: 600, progress: { step: 2 } });
    assert.equal(extended.jid, job.jid);
    assert.deepEqual((await client.get(job.jid)).progress, { step: 2 });
    await client.ack(job.jid, job.lease);
    await assert.rejects(client.get(job.jid), JobNotFound);
  });

  it("raises typed errors carrying the server's code and field errors", async () => {
    const queue = uniqueQueue();
    const job = await client.push({ jobtype: "x", queue });
    const [leased] = await client.fetch({ queues: [queue], wid: "ts-client" });
    const lost = await client.ack(job.jid, "stale").catch((e: unknown) => e);
    assert.ok(lost instanceof LeaseLost && lost instanceof WerkError);
    assert.equal(lost.code, "lease_lost");
    assert.equal(lost.status, 409);
    const invalid = await client.push({ jobtype: "x", queue: "no spaces" }).catch((e: unknown) => e);
    assert.ok(invalid instanceof ValidationError);
    assert.deepEqual(invalid.errors.map((e) => e.loc), ["queue"]);
    assert.equal((await client.fail(job.jid, leased!.lease!, { errtype: "E", retry: false })).state, "dead");
  });

  it("pushes unique and expiring jobs", async () => {
    const queue = uniqueQueue();
    const first = await client.push({ jobtype: "report", args: [600], queue, unique: { for: 60 } });
    assert.equal(first.unique?.key.startsWith("sha256:"), true);
    const refused = await client.push({ jobtype: "report", args: [600], queue, unique: {} }).catch((e: unknown) => e);
    assert.ok(refused instanceof NotUnique);
    assert.equal(refused.existingJid, first.jid);
    const same = await client.push({ jobtype: "report", args: [600], queue, unique: { on_conflict: "existing" } });
    assert.equal(same.jid, first.jid);
    assert.equal(same.duplicate, true);
    const many = await client.pushMany([{ jobtype: "a", queue }, { jobtype: "report", args: [600], queue, unique: { on_conflict: "existing" } }]);
    assert.deepEqual(many.conflicts, [{ index: 1, existing_jid: first.jid, on_conflict: "existing" }]);
    const expiring = await client.push({ jobtype: "soon", queue, expires_in: 60 });
    assert.ok(expiring.expires_at);
  });

  it("pushes more than one request's worth of jobs, and acks many", async () => {
    const queue = uniqueQueue();
    const jobs = Array.from({ length: 1001 }, (_, i) => ({ jobtype: "bulk", args: [i], queue }));
    const result = await client.pushMany(jobs);
    assert.equal(result.created, 1001);
    assert.equal(result.jobs.length, 1001);
    const known = result.jobs[0]!.jid;
    const short = await client.pushJids([
      { jobtype: "bulk", args: [0], queue, jid: known },
      { jobtype: "bulk", args: ["new"], queue, jid: `${queue}-new` },
    ]);
    assert.deepEqual(short, { jids: [known, `${queue}-new`], created: 1, existed: [known], conflicts: [], refs: {} });
    const fetched = await client.fetch({ queues: [queue], wid: "ts-client", count: 100 });
    assert.equal(fetched.length, 100);
    const acked = await client.ackMany(fetched.map((j) => ({ jid: j.jid, lease: j.lease! })));
    assert.equal(acked.acked.length, 100);
    const again = await client.ackMany([{ jid: fetched[0]!.jid, lease: fetched[0]!.lease! }]);
    assert.deepEqual(again, { acked: [], lease_lost: [fetched[0]!.jid] });
  });

  it("answers pushJids with every request's refs and unique conflicts, indexed in the whole push", async () => {
    const queue = uniqueQueue();
    const holder = await client.push({ jobtype: "report", args: ["held"], queue, unique: { for: 60 } });
    const jobs = Array.from({ length: 1002 }, (_, i) => ({ jobtype: "bulk", args: [i], queue }) as JobPush);
    jobs[0] = { ...jobs[0]!, ref: "first" };
    jobs[1000] = { jobtype: "report", args: ["held"], queue, unique: { on_conflict: "existing" } };
    jobs[1001] = { ...jobs[1001]!, ref: "last" };
    const short = await client.pushJids(jobs);
    assert.equal(short.jids.length, 1002);
    assert.equal(short.created, 1001);
    assert.deepEqual(short.refs, { first: short.jids[0], last: short.jids[1001] });
    assert.deepEqual(short.conflicts, [{ index: 1000, existing_jid: holder.jid, on_conflict: "existing" }]);
    assert.equal(short.jids[1000], holder.jid);
  });

  it("long-polls until a job arrives", async () => {
    const queue = uniqueQueue();
    const started = Date.now();
    const pending = client.fetch({ queues: [queue], wid: "ts-client", wait: 10 });
    setTimeout(() => void client.push({ jobtype: "late", queue }), 300);
    const [job] = await pending;
    assert.equal(job?.jobtype, "late");
    assert.ok(Date.now() - started < 9000);
  });

  it("reports an unreachable server as Unavailable after its retries", async () => {
    const offline = new Client({ url: "http://127.0.0.1:9", retries: 1, timeoutMs: 2000 });
    await assert.rejects(offline.info(), (e: unknown) => e instanceof Unavailable && e.status === undefined);
  });

  it("beats and reads info", async () => {
    assert.equal(await client.beat({ wid: uniqueQueue("ts-beat"), hostname: "h", labels: ["node"] }), "running");
    const info = await client.info();
    assert.equal(typeof info.server.version, "string");
  });
});
