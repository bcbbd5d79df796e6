// Replays the language-neutral scenarios of client/contract/ through this package's Client.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";

import { Client, WerkError } from "../src/index.js";

const SCENARIOS = new URL("../../../contract/scenarios/", import.meta.url);
const client = new Client({ url: process.env.WERK_URL });

type Params = Record<string, any>;

const DATETIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

function substitute(value: unknown, vars: Record<string, unknown>): any {
  if (typeof value === "string") {
    const whole = /^\$\{(\w+)\}$/.exec(value);
    if (whole) return vars[whole[1]!];
    return value.replace(/\$\{(\w+)\}/g, (_, name: string) => String(vars[name]));
  }
  if (Array.isArray(value)) return value.map((v) => substitute(v, vars));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, vars)]));
  }
  return value;
}

function typeOk(pattern: string, actual: unknown): boolean {
  if (pattern.endsWith("?")) {
    if (actual === null || actual === undefined) return true;
    pattern = pattern.slice(0, -1);
  }
  switch (pattern) {
    case "$any": return true;
    case "$string": return typeof actual === "string";
    case "$integer": return Number.isInteger(actual);
    case "$number": return typeof actual === "number";
    case "$boolean": return typeof actual === "boolean";
    case "$datetime": return typeof actual === "string" && DATETIME.test(actual);
    case "$array": return Array.isArray(actual);
    case "$object": return actual !== null && typeof actual === "object" && !Array.isArray(actual);
    default: throw new Error(`unknown pattern ${pattern}`);
  }
}

export function mismatches(expected: unknown, actual: unknown, path = "$"): string[] {
  if (typeof expected === "string" && expected.startsWith("$")) {
    return typeOk(expected, actual) ? [] : [`${path}: expected ${expected}, got ${JSON.stringify(actual)}`];
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      return [`${path}: expected ${expected.length} items, got ${JSON.stringify(actual)}`];
    }
    return expected.flatMap((e, i) => mismatches(e, actual[i], `${path}.${i}`));
  }
  if (expected !== null && typeof expected === "object") {
    if (actual === null || typeof actual !== "object") return [`${path}: expected an object, got ${JSON.stringify(actual)}`];
    return Object.entries(expected).flatMap(([k, v]) =>
      k in actual ? mismatches(v, (actual as Record<string, unknown>)[k], `${path}.${k}`) : [`${path}.${k}: missing`],
    );
  }
  return expected === actual ? [] : [`${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`];
}

async function perform(op: string, p: Params): Promise<unknown> {
  const { jid, lease, ...rest } = p;
  switch (op) {
    case "push": return client.push(p as any);
    case "push_many": return client.pushMany(p.jobs);
    case "get": return client.get(jid);
    case "info": return client.info();
    case "fetch": return { jobs: await client.fetch(p as any) };
    case "ack": await client.ack(jid, lease, rest.result); return null;
    case "result": return client.result(jid, { wait: rest.wait ?? 0 });
    case "dependencies": return { dependencies: await client.dependencies(jid), next: null };
    case "ack_many": return client.ackMany(p.acks);
    case "fail": return client.fail(jid, lease, rest);
    case "extend": return client.extend(jid, lease, rest);
    case "beat": return { state: await client.beat(p as any) };
    case "batch_new": return client.createBatch(p as any);
    case "batch_open": return client.reopenBatch(p.bid);
    case "batch_commit": return client.commitBatch(p.bid);
    case "batch_status": return client.batchStatus(p.bid);
    case "jobs_list": return client.listJobs(p);
    case "job_retry": return client.retryJob(jid);
    case "job_kill": return client.killJob(jid);
    case "job_cancel": return client.cancelJob(jid);
    case "job_delete": await client.deleteJob(jid); return null;
    case "jobs_retry": return client.retryJobs(p);
    case "jobs_kill": return client.killJobs(p);
    case "jobs_cancel": return client.cancelJobs(p);
    case "jobs_delete": return client.deleteJobs(p);
    case "queues_list": return { queues: await client.listQueues() };
    case "queue_get": return client.queue(p.queue);
    case "queue_pause": return client.pauseQueue(p.queue);
    case "queue_resume": return client.resumeQueue(p.queue);
    case "queue_clear": return { queue: p.queue, deleted: await client.clearQueue(p.queue) };
    case "workers_list": return { workers: await client.listWorkers({ includeGone: p.include_gone }) };
    case "worker_quiet": return { wid: p.wid, state: await client.quietWorker(p.wid) };
    case "worker_terminate": return { wid: p.wid, state: await client.terminateWorker(p.wid) };
    case "history": return { days: await client.history({ days: p.days, queue: p.queue }) };
    case "batches_list": return client.listBatches(p);
    default: throw new Error(`unknown op ${op}`);
  }
}

function lookup(value: any, dotted: string): unknown {
  for (const part of dotted.split(".")) value = Array.isArray(value) ? value[Number(part)] : value[part];
  return value;
}

describe("contract scenarios (client/contract/scenarios)", () => {
  const files = readdirSync(SCENARIOS).filter((f) => f.endsWith(".json")).sort();
  assert.ok(files.length > 0, "no scenarios found");
  for (const file of files) {
    const scenario = JSON.parse(readFileSync(new URL(file, SCENARIOS), "utf8"));
    it(`${scenario.name}: ${scenario.description}`, async () => {
      const vars: Record<string, unknown> = { run: randomBytes(4).toString("hex") };
      for (const [n, step] of (scenario.steps as any[]).entries()) {
        const where = `${scenario.name} step ${n} (${step.op})`;
        const params = substitute(step.params ?? {}, vars);
        const expect = substitute(step.expect, vars);
        let result: unknown;
        try {
          result = await perform(step.op, params);
        } catch (error) {
          if (!(error instanceof WerkError) || !("error" in expect)) throw error;
          const got = { status: error.status, code: error.code, errors: error.errors };
          assert.deepEqual(mismatches(expect.error, got), [], `${where}: ${error.message}`);
          continue;
        }
        assert.ok(!("error" in expect), `${where}: expected ${JSON.stringify(expect.error)}, got ${JSON.stringify(result)}`);
        assert.deepEqual(mismatches(expect.result, result), [], where);
        for (const [name, dotted] of Object.entries(step.save ?? {})) vars[name] = lookup(result, dotted as string);
      }
    });
  }
});
