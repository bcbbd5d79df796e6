// Drives a TypeScript client made from openapi/openapi.json by @hey-api/openapi-ts (with its
// fetch client): push, batch push, fetch, ack, fail, extend, get, info, and typed 409/422 errors.
// Compiled and run by tests/e2e/clients/test_generated.py next to the freshly generated ./client.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";

import { client } from "./client/client.gen.js";
import {
  jobsGet, jobsPush, jobsPushBatch, systemInfo, workAck, workExtend, workFail, workFetch,
} from "./client/sdk.gen.js";
import type { Problem } from "./client/types.gen.js";

client.setConfig({ baseUrl: process.env.WERK_URL });
const queue = `gen-hey-${randomBytes(4).toString("hex")}`;

function problem(error: unknown, status: number, code: string): Problem {
  const p = error as Problem; // the declared error type of the operation
  assert.equal(p?.code, code, JSON.stringify(error));
  assert.equal(p.status, status);
  return p;
}

// Unset optional fields sent as null, as many generated clients do: the defaults apply.
const pushed = await jobsPush({ body: { jobtype: "gen", args: [1, "a"], queue, priority: null, retry: null } });
assert.equal(pushed.response.status, 201, JSON.stringify(pushed.error));
assert.ok(pushed.data);
assert.equal(pushed.data.created, true);
assert.equal(pushed.data.retry, 25);
const again = await jobsPush({ body: { jobtype: "gen", jid: pushed.data.jid, queue } });
assert.equal(again.response.status, 201);
assert.equal(again.data?.created, false); // the jid existed: nothing new stored

const batch = await jobsPushBatch({ body: { jobs: [{ jobtype: "gen", args: [2], queue }, { jobtype: "gen", queue }] } });
assert.equal(batch.data?.created, 2);
assert.equal(batch.data?.jobs?.length, 2);
assert.deepEqual(batch.data?.existed, []);
const minimal = await jobsPushBatch({
  body: { jobs: [{ jobtype: "gen", jid: pushed.data.jid, queue }] },
  headers: { prefer: "return=minimal" },
});
assert.deepEqual(minimal.data?.existed, [pushed.data.jid]);
assert.equal(minimal.data?.jobs, undefined);

const fetched = await workFetch({ body: { queues: [queue], wid: "gen-hey", count: 3, wait: null } });
const [first, second, third] = fetched.data?.jobs ?? [];
assert.ok(first && second && third, JSON.stringify(fetched.data));
assert.equal(typeof first.lease, "string");

const acked = await workAck({ path: { jid: first.jid }, body: { lease: first.lease } });
assert.equal(acked.response.status, 204);
const lost = await workAck({ path: { jid: second.jid }, body: { lease: "not-the-lease" } });
problem(lost.error, 409, "lease_lost");

const extended = await workExtend({ path: { jid: second.jid }, body: { lease: second.lease, progress: { step: 1 } } });
assert.ok(extended.data?.lease_expires_at, JSON.stringify(extended.error));
const failed = await workFail({
  path: { jid: second.jid },
  body: { lease: second.lease, errtype: "GeneratedError", message: "from a generated client", retry_in: null },
});
assert.equal(failed.data?.state, "scheduled", JSON.stringify(failed.error));
const job = await jobsGet({ path: { jid: second.jid } });
assert.equal(job.data?.failure?.errtype, "GeneratedError");
assert.deepEqual(job.data?.progress, { step: 1 });
assert.ok(!("lease" in (job.data ?? {})));

const info = await systemInfo();
assert.ok((info.data?.totals.processed ?? 0) >= 1);

const invalid = await jobsPush({ body: { jobtype: "gen", queue: "bad queue" } });
assert.equal(invalid.response.status, 422);
assert.equal(problem(invalid.error, 422, "invalid_request").errors?.[0]?.loc, "queue");
const missing = await jobsGet({ path: { jid: "no-such-job-anywhere" } });
problem(missing.error, 404, "job_not_found");
console.log("hey-api typescript client: ok");
