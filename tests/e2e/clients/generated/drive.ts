// Drives a TypeScript client made from openapi/openapi.json with openapi-typescript (types) and
// openapi-fetch (runtime): push -> fetch -> ack -> fail, plus typed errors. Compiled and run by
// tests/e2e/clients/test_generated.py next to the freshly generated schema.d.ts.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";

import createClient from "openapi-fetch";

import type { paths } from "./schema.js";

const client = createClient<paths>({ baseUrl: process.env.WERK_URL });
const queue = `gen-ts-${randomBytes(4).toString("hex")}`;

const pushed = await client.POST("/v1/jobs", { body: { jobtype: "gen", args: [1, "a"], queue } });
assert.equal(pushed.response.status, 201);
assert.equal(pushed.data?.state, "available");
await client.POST("/v1/jobs", { body: { jobtype: "gen", args: [2], queue } });

const fetched = await client.POST("/v1/fetch", { body: { queues: [queue], wid: "gen-ts", count: 2, wait: 0 } });
const [first, other] = fetched.data?.jobs ?? [];
assert.ok(first?.lease && other?.lease);

const acked = await client.POST("/v1/jobs/{jid}/ack", { params: { path: { jid: first.jid } }, body: { lease: first.lease } });
assert.equal(acked.response.status, 204);

const lost = await client.POST("/v1/jobs/{jid}/ack", {
  params: { path: { jid: other.jid } },
  body: { lease: "not-the-lease" },
});
assert.equal(lost.response.status, 409);
assert.equal(lost.error?.code, "lease_lost"); // typed as Problem

const failed = await client.POST("/v1/jobs/{jid}/fail", {
  params: { path: { jid: other.jid } },
  body: { lease: other.lease, errtype: "GeneratedError", message: "from a generated client" },
});
assert.equal(failed.data?.state, "scheduled");
const job = await client.GET("/v1/jobs/{jid}", { params: { path: { jid: other.jid } } });
assert.equal(job.data?.failure?.errtype, "GeneratedError");

const invalid = await client.POST("/v1/jobs", { body: { jobtype: "gen", queue: "bad queue" } });
assert.equal(invalid.response.status, 422);
assert.equal(invalid.error?.code, "invalid_request");
assert.equal(invalid.error?.errors?.[0]?.loc, "queue");
const missing = await client.GET("/v1/jobs/{jid}", { params: { path: { jid: "no-such-job-anywhere" } } });
assert.equal(missing.error?.code, "job_not_found");
console.log("generated typescript client: ok");
