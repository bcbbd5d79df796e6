import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  BatchClosed,
  BatchNotFound,
  Client,
  Forbidden,
  JobNotFound,
  LeaseLost,
  NotUnique,
  PayloadTooLarge,
  ResultTooLarge,
  ServerError,
  Unauthorized,
  Unavailable,
  ValidationError,
  WerkError,
  errorFromResponse,
} from "../src/index.js";
import { URL_, uniqueQueue } from "./helpers.js";

const client = new Client({ url: URL_ });

describe("errors", () => {
  it("maps each code the server answers to the class the Python SDK does", () => {
    // [status, code (null: an answer without one), class]; the codes are the server's error tree
    // (server/werk/errors.py, api/problems.py), the classes werk_client.errors' mapping.
    const cases: Array<[number, string | null, typeof WerkError]> = [
      [422, "invalid_request", ValidationError],
      [400, "invalid_json", ValidationError],
      [400, "malformed_request", ValidationError],
      [422, "dependency_cycle", ValidationError],
      [422, "dependency_not_found", ValidationError],
      [404, "job_not_found", JobNotFound],
      [404, "batch_not_found", BatchNotFound],
      [409, "batch_committed", BatchClosed],
      [409, "batch_finished", BatchClosed],
      [409, "lease_lost", LeaseLost],
      [409, "not_unique", NotUnique],
      [401, "unauthorized", Unauthorized],
      [401, "ambiguous_credentials", Unauthorized],
      [429, "too_many_auth_failures", Unauthorized],
      [403, "forbidden", Forbidden],
      [403, "cross_site_request", Forbidden],
      [413, "payload_too_large", PayloadTooLarge],
      [413, "result_too_large", ResultTooLarge],
      [503, "database_unavailable", Unavailable],
      [500, "internal_error", ServerError],
      [500, "schema_too_new", ServerError],
      [415, "unsupported_media_type", WerkError],
      [408, "request_timeout", WerkError],
      [421, "host_not_allowed", WerkError],
      [431, "header_too_large", WerkError],
      [409, "job_state_conflict", WerkError],
      [404, "worker_not_found", WerkError],
      [405, "method_not_allowed", WerkError],
      [409, "queue_paused", WerkError],
      [404, null, JobNotFound],
      [413, null, PayloadTooLarge],
      [401, null, Unauthorized],
      [502, null, Unavailable],
      [500, null, ServerError],
      [418, null, WerkError],
    ];
    for (const [status, code, cls] of cases) {
      const body = { status, detail: "x", errors: [{ loc: "jobs.3", message: "m" }], ...(code === null ? {} : { code }) };
      const error = errorFromResponse(status, body);
      const what = `${status} ${code}`;
      assert.equal(error.constructor, cls, `${what}: ${error.constructor.name}, not ${cls.name}`);
      assert.equal(error.code, code ?? `http_${status}`, what);
      assert.equal(error.status, status, what);
      assert.equal(error.detail, "x", what);
      assert.deepEqual(error.errors, [{ loc: "jobs.3", message: "m" }], what);
    }
    assert.ok(errorFromResponse(413, { code: "result_too_large" }) instanceof PayloadTooLarge);
  });

  it("rejects an ack whose result is over the server's limit with ResultTooLarge, a PayloadTooLarge, acking nothing", async () => {
    const queue = uniqueQueue();
    const pushed = await client.push({ jobtype: "report", queue, keep_result_for: 60 });
    const [job] = await client.fetch({ queues: [queue], wid: "ts-errors" });
    // Over the server's default WERK_MAX_RESULT_BYTES (64 KiB).
    const refused = await client.ack(job!.jid, job!.lease!, "x".repeat(70_000)).catch((e: unknown) => e);
    assert.ok(refused instanceof ResultTooLarge, String(refused));
    assert.ok(refused instanceof PayloadTooLarge && refused instanceof WerkError);
    assert.equal(refused.code, "result_too_large");
    assert.equal(refused.status, 413);
    assert.equal(refused.name, "ResultTooLarge");
    assert.equal((await client.get(pushed.jid)).state, "active");
    await client.ack(job!.jid, job!.lease!, { small: true });
    assert.deepEqual((await client.result(pushed.jid)).result, { small: true });
  });
});
