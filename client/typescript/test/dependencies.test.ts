// Dependency results beyond the server's budget per answer (WERK_MAX_DEPENDENCY_RESULTS_BYTES,
// 1 MiB by default): a fetch or a read marks them `result_omitted`, `Client.dependencies` reads
// them all from the job's dependency pages, and a Worker fills them in before its handler runs.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";

import { Client, type Dependency, type FetchedJob, JobNotFound, type JobPush, Unavailable, ValidationError, Worker } from "../src/index.js";
import { URL_, eventually, sleep, uniqueQueue } from "./helpers.js";

const client = new Client({ url: URL_ });
const quietErrors = { onError: (e: unknown) => console.error("worker error:", e), handleSignals: false, url: URL_ };

const DEPENDENCIES = 20;

interface Graph {
  /** The dependencies' jids, in jid order. */
  deps: string[];
  /** Each dependency's result: 60,000 characters, so 20 of them exceed the 1 MiB budget. */
  results: Map<string, string>;
  /** The jobs depending on all of them. */
  dependents: string[];
  queue: string;
}

/** DEPENDENCIES acked dependencies, each with a large result of its own, and `dependents` jobs (`dependent`) depending on all of them. */
async function graph(dependents = 1, dependent: Partial<JobPush> = {}): Promise<Graph> {
  const depQueue = uniqueQueue("ts-deps");
  const queue = uniqueQueue("ts-dependent");
  const pushed = await client.pushJids(Array.from({ length: DEPENDENCIES }, () => ({ jobtype: "part", queue: depQueue })));
  const deps = [...pushed.jids].sort();
  const made = await client.pushJids(Array.from({ length: dependents }, () => ({ ...dependent, jobtype: "whole", queue, depends_on: deps })));
  const results = new Map<string, string>();
  const jobs = await client.fetch({ queues: [depQueue], wid: "ts-deps", count: DEPENDENCIES });
  assert.equal(jobs.length, DEPENDENCIES);
  for (const job of jobs) {
    const result = randomBytes(30_000).toString("hex");
    results.set(job.jid, result);
    await client.ack(job.jid, job.lease!, result);
  }
  return { deps, results, dependents: [...made.jids].sort(), queue };
}

/** Run `worker` until `done` holds; stopped whatever happens, so a failing test ends. */
async function runUntil(worker: Worker, done: () => boolean, what: string): Promise<void> {
  const running = worker.run();
  try {
    await eventually(done, 20_000, what);
  } finally {
    worker.stop();
    await running;
  }
}

function expectComplete(got: Dependency[], g: Graph, what: string): void {
  assert.deepEqual(got.map((d) => d.jid), g.deps, `${what}: every dependency, in jid order`);
  for (const dep of got) {
    assert.equal(dep.outcome, "completed", `${what}: ${dep.jid}`);
    assert.equal(dep.result, g.results.get(dep.jid), `${what}: ${dep.jid}'s result`);
    assert.ok(!("result_omitted" in dep), `${what}: ${dep.jid} still marked result_omitted`);
  }
}

describe("Dependency results beyond the budget of one answer", () => {
  it("a read leaves some results out; dependencies() reads every page and returns them all", async () => {
    const g = await graph();
    const [dependent] = g.dependents as [string];
    const read = (await client.get(dependent)).dependencies ?? [];
    assert.deepEqual(read.map((d) => d.jid), g.deps);
    const omitted = read.filter((d) => d.result_omitted);
    assert.ok(omitted.length > 0 && omitted.length < DEPENDENCIES, `${omitted.length} results left out`);
    for (const dep of read) {
      if (dep.result_omitted) assert.equal(dep.result, null, dep.jid);
      else assert.equal(dep.result, g.results.get(dep.jid), dep.jid);
    }

    const own = new Client({ url: URL_ });
    const pages: (string | null | undefined)[] = [];
    const page = own.dependencyPage.bind(own);
    own.dependencyPage = (jid, options, more) => (pages.push(options?.cursor), page(jid, options, more));
    const all = await own.dependencies(dependent);
    expectComplete(all, g, "dependencies()");
    assert.ok(pages.length >= 2, `${pages.length} pages`);
    assert.equal(pages[0], null, "from the first dependency");
  });

  it("dependencyPage() reads one page after a cursor, within the limit", async () => {
    const g = await graph();
    const [dependent] = g.dependents as [string];
    const page = await client.dependencyPage(dependent, { cursor: g.deps[4], limit: 3 });
    assert.deepEqual(page.dependencies.map((d) => d.jid), g.deps.slice(5, 8));
    assert.deepEqual(page.dependencies.map((d) => d.result), g.deps.slice(5, 8).map((jid) => g.results.get(jid)));
    assert.equal(page.next, g.deps[7]);
    await assert.rejects(client.dependencyPage(dependent, { limit: 0 }), ValidationError);
  });

  it("dependencies() of a job not stored rejects with JobNotFound", async () => {
    await assert.rejects(client.dependencies(`no-such-${randomBytes(6).toString("hex")}`), (error: unknown) => {
      assert.ok(error instanceof JobNotFound, String(error));
      assert.equal(error.status, 404);
      assert.equal(error.code, "job_not_found");
      return true;
    });
  });

  it("a Worker fills in the results a fetch left out before its handler runs, reading from the first one left out", async () => {
    // Two dependents fetched together share one answer's budget: the second gets no result at all.
    const g = await graph(2);
    const own = new Client({ url: URL_ });
    const fetched: FetchedJob[] = [];
    const fetch = own.fetch.bind(own);
    own.fetch = async (request, signal) => {
      const jobs = await fetch(request, signal);
      fetched.push(...structuredClone(jobs)); // the worker fills the jobs themselves in
      return jobs;
    };
    const cursors = new Map<string, (string | null | undefined)[]>();
    const page = own.dependencyPage.bind(own);
    own.dependencyPage = (jid, options, more) => {
      cursors.set(jid, [...(cursors.get(jid) ?? []), options?.cursor]);
      return page(jid, options, more);
    };
    const seen = new Map<string, Dependency[]>();
    const worker = new Worker({ ...quietErrors, client: own, queues: [g.queue], fetchWait: 1 });
    worker.register("whole", (_args, ctx) => void seen.set(ctx.job.jid, structuredClone(ctx.job.dependencies ?? [])));
    await runUntil(worker, () => worker.processed === 2, "both dependents");

    assert.deepEqual([...seen.keys()].sort(), g.dependents);
    for (const [jid, deps] of seen) expectComplete(deps, g, `the handler of ${jid}`);
    let left = 0;
    for (const job of fetched) {
      const deps = job.dependencies ?? [];
      const first = deps.findIndex((d) => d.result_omitted);
      if (first < 0) {
        assert.equal(cursors.get(job.jid), undefined, `${job.jid}: nothing left out, nothing read`);
        continue;
      }
      left++;
      assert.equal(cursors.get(job.jid)?.[0], first === 0 ? null : deps[first - 1]!.jid, `${job.jid}: the first page read`);
    }
    assert.ok(left > 0, "a fetch left results out");
  });

  it("a Worker reads the dependencies a fetch did not list before its handler runs", async () => {
    // One answer lists the server's WERK_MAX_DEPENDENCIES_LISTED (10,000): of two dependents of
    // 6,000 jobs each, fetched together, the second is listed only in part.
    const many = 6_000;
    const depQueue = uniqueQueue("ts-many-deps");
    const queue = uniqueQueue("ts-many-dependent");
    const pushed = await client.pushJids(Array.from({ length: many }, () => ({ jobtype: "part", queue: depQueue })));
    const deps = [...pushed.jids].sort();
    await client.pushJids([0, 1].map(() => ({ jobtype: "whole", queue, depends_on: deps })));
    for (let left = many; left > 0; ) {
      const jobs = await client.fetch({ queues: [depQueue], wid: "ts-many-deps", count: 100 });
      await client.ackMany(jobs.map((job) => ({ jid: job.jid, lease: job.lease! })));
      left -= jobs.length;
    }
    const own = new Client({ url: URL_ });
    const omitted: boolean[] = [];
    const fetch = own.fetch.bind(own);
    own.fetch = async (request, signal) => {
      const jobs = await fetch(request, signal);
      for (const job of jobs) omitted.push(job.dependencies_omitted === true);
      return jobs;
    };
    const seen: string[][] = [];
    const worker = new Worker({ ...quietErrors, client: own, queues: [queue], fetchWait: 1 });
    worker.register("whole", (_args, ctx) => {
      assert.ok(!("dependencies_omitted" in ctx.job));
      seen.push((ctx.job.dependencies ?? []).map((d) => d.jid));
    });
    await runUntil(worker, () => worker.processed === 2, "both dependents");
    assert.deepEqual(seen, [deps, deps]);
    assert.deepEqual(omitted.sort(), [false, true]);
  });

  it("a Worker fails the attempt when the results left out cannot be read, without running the handler", async () => {
    const g = await graph();
    const [dependent] = g.dependents as [string];
    const own = new Client({ url: URL_ });
    own.dependencyPage = async () => {
      throw new Unavailable("the server cannot be reached", { code: "unreachable" });
    };
    let ran = 0;
    const worker = new Worker({ ...quietErrors, client: own, queues: [g.queue], fetchWait: 1 });
    worker.register("whole", () => void ran++);
    await runUntil(worker, () => worker.failed === 1, "the failure");
    assert.equal(ran, 0);
    assert.equal(worker.processed, 0);
    const stored = await client.get(dependent);
    assert.equal(stored.state, "scheduled", "retried later");
    assert.equal(stored.failure?.errtype, "Unavailable");
    assert.match(stored.failure?.message ?? "", /cannot be reached/);
  });

  it("a Worker keeps the lease extended while it reads the results left out", async () => {
    const g = await graph(1, { reserve_for: 60 });
    const [dependent] = g.dependents as [string];
    const own = new Client({ url: URL_ });
    let reading = false;
    let extendedWhileReading = 0;
    const page = own.dependencyPage.bind(own);
    own.dependencyPage = async (jid, options, more) => {
      reading = true;
      // extendAt 0.02 of reserve_for 60: an extension every 1.2 s.
      await sleep(2_600);
      reading = false;
      return page(jid, options, more);
    };
    const extend = own.extend.bind(own);
    own.extend = (jid, lease, options) => {
      if (reading) extendedWhileReading++;
      return extend(jid, lease, options);
    };
    let seen: Dependency[] = [];
    const worker = new Worker({ ...quietErrors, client: own, queues: [g.queue], fetchWait: 1, extendAt: 0.02 });
    worker.register("whole", (_args, ctx) => void (seen = structuredClone(ctx.job.dependencies ?? [])));
    await runUntil(worker, () => worker.processed === 1, "the dependent");
    assert.ok(extendedWhileReading >= 1, `${extendedWhileReading} extensions while reading`);
    expectComplete(seen, g, `the handler of ${dependent}`);
  });
});
