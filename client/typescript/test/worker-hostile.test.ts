import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { describe, it } from "node:test";

import {
  Client,
  JobNotFound,
  LeaseLost,
  PayloadTooLarge,
  ServerError,
  Unavailable,
  ValidationError,
  Worker,
  WerkError,
  newJid,
  type ExtendResult,
  type FetchedJob,
  type JobContext,
  type JobResult,
} from "../src/index.js";
import { URL_, eventually, sleep, uniqueQueue } from "./helpers.js";

const client = new Client({ url: URL_ });
const quietErrors = { onError: (e: unknown) => console.error("worker error:", e), handleSignals: false, url: URL_ };

type Failure = { errtype: string; message: string; backtrace: string[] };

async function failureOf(jid: string): Promise<Failure | undefined> {
  return ((await client.get(jid)) as { failure?: Failure | null }).failure ?? undefined;
}

const unreachable = (): Unavailable => new Unavailable("POST failed: connect ECONNREFUSED", { code: "unreachable" });

/**
 * `worker.run()` while `body` runs, then `stop(graceMs)` and its end; should `body` throw, the
 * worker stops at once (a failed test leaves no worker fetching behind).
 */
async function during(worker: Worker, body: () => Promise<void>, graceMs = 0): Promise<void> {
  const running = worker.run();
  let ok = false;
  try {
    await body();
    ok = true;
  } finally {
    worker.stop(ok ? graceMs : 0);
    await running;
  }
}

/** Errors the worker reported, coded `settle_failed`. */
const settleFailures = (errors: unknown[]): unknown[] => errors.filter((e) => e instanceof WerkError && e.code === "settle_failed");

describe("Worker against hostile handlers", () => {
  it("fails a job whose handler throws a value that cannot be described, and keeps running", async () => {
    const queue = uniqueQueue();
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1 });
    worker.register("bare", () => {
      throw Object.create(null);
    });
    worker.register("hostile", () => {
      const refuse = (): never => {
        throw new Error("no");
      };
      throw new Proxy({}, { get: refuse, has: refuse, getPrototypeOf: refuse, ownKeys: refuse });
    });
    const bare = await client.push({ jobtype: "bare", queue, retry: 3 });
    const hostile = await client.push({ jobtype: "hostile", queue, retry: 3 });
    await during(worker, async () => {
      await eventually(async () => (await failureOf(bare.jid)) !== undefined && (await failureOf(hostile.jid)) !== undefined, 10_000, "both failures");
    });
    assert.deepEqual(await failureOf(bare.jid).then((f) => [f?.errtype, f?.message]), ["object", "{}"]);
    assert.equal((await failureOf(hostile.jid))?.errtype, "unknown");
  });

  it("fails the job, and reports why, when running it throws", async () => {
    const queue = uniqueQueue();
    const errors: unknown[] = [];
    const worker = new Worker({ ...quietErrors, onError: (e) => errors.push(e), queues: [queue], fetchWait: 1 });
    (worker as unknown as { execute: () => Promise<void> }).execute = () => Promise.reject(new TypeError("the worker broke"));
    const job = await client.push({ jobtype: "any", queue, retry: 3 });
    await during(worker, async () => {
      await eventually(async () => (await failureOf(job.jid)) !== undefined, 10_000, "the failure");
    });
    const failure = await failureOf(job.jid);
    assert.equal(failure?.errtype, "WorkerError");
    assert.match(failure?.message ?? "", /the worker broke/);
    assert.ok(errors.some((e) => e instanceof TypeError), String(errors));
    assert.deepEqual(worker.runningJids, []);
  });

  it("trims and escapes every text of a failure report to what the server takes", async () => {
    const queue = uniqueQueue();
    const worker = new Worker({ ...quietErrors, queues: [queue], fetchWait: 1 });
    worker.register("boom", (args) => {
      switch (args[0]) {
        case "long":
          throw new Error("x".repeat(100_000));
        case "nul":
          throw new Error("a\0b");
        case "surrogate":
          throw new Error("half \ud800 of a pair");
        case "errtype": {
          const error = new Error("named at length");
          error.name = "E".repeat(300);
          throw error;
        }
        case "fields":
          throw { errtype: 5, message: ["x"] };
        default:
          throw { errtype: "Wide", message: "m", backtrace: ["a".repeat(20_000), 7], retry_in: 1e12, extra: true };
      }
    });
    const kinds = ["long", "nul", "surrogate", "errtype", "fields", "wide"];
    const jobs = await client.pushMany(kinds.map((kind) => ({ jobtype: "boom", args: [kind], queue, retry: 3 })));
    await during(worker, async () => {
      await eventually(
        async () => (await Promise.all(jobs.jids.map(failureOf))).every((f) => f !== undefined),
        10_000,
        "every failure recorded",
      );
    });
    const [long, nul, surrogate, errtype, fields, wide] = (await Promise.all(jobs.jids.map(failureOf))) as Failure[];
    assert.equal(long!.message, "x".repeat(4000));
    assert.equal(nul!.message, "a\\x00b");
    assert.equal(surrogate!.message, "half \ufffd of a pair");
    assert.equal(errtype!.errtype, "E".repeat(200));
    assert.deepEqual([fields!.errtype, fields!.message], ["5", "x"]);
    assert.deepEqual([wide!.errtype, wide!.message, wide!.backtrace], ["Wide", "m", ["a".repeat(2000), "7"]]);
  });

  it("drops a result that is not well-formed Unicode, and acks it and the rest of its batch", async () => {
    const queue = uniqueQueue();
    const pushed = await client.pushMany(Array.from({ length: 8 }, (_, i) => ({ jobtype: "report", args: [i], queue, keep_result_for: 60 })));
    const errors: unknown[] = [];
    const worker = new Worker({ ...quietErrors, onError: (e) => errors.push(e), queues: [queue], concurrency: 8, fetchWait: 1 });
    worker.register("report", (args) => {
      const i = args[0] as number;
      if (i === 2) return "\ud800";
      if (i === 5) return { ["key \udc00"]: 1, fine: "\\ud800 is text" };
      return { n: i, text: "\\ud800" };
    });
    let results: JobResult[] = [];
    await during(worker, async () => {
      results = await Promise.all(pushed.jids.map((jid) => client.result(jid, { wait: 5 })));
    }, 25_000);
    assert.deepEqual(errors, []);
    results.forEach((got, i) => {
      assert.equal(got.state, "completed", `job ${i}`);
      assert.deepEqual(got.result, i === 2 || i === 5 ? null : { n: i, text: "\\ud800" }, `job ${i}`);
    });
  });

  it("acks each job on its own when its batch is refused as invalid JSON", async () => {
    const queue = uniqueQueue();
    const pushed = await client.pushMany(Array.from({ length: 3 }, (_, i) => ({ jobtype: "report", args: [i], queue, keep_result_for: 60 })));
    const own = new Client({ url: URL_ });
    const ackMany = own.ackMany.bind(own);
    let refused = 0;
    own.ackMany = (acks) =>
      refused++ === 0 ? Promise.reject(new ValidationError("not JSON", { code: "invalid_json", status: 400 })) : ackMany(acks);
    const errors: unknown[] = [];
    const worker = new Worker({ ...quietErrors, onError: (e) => errors.push(e), client: own, queues: [queue], concurrency: 3, fetchWait: 1 });
    worker.register("report", (args) => ({ n: args[0] }));
    await during(worker, async () => {
      await eventually(() => worker.processed === 3 || errors.length > 0, 10_000, "three acks");
    }, 25_000);
    assert.deepEqual(errors, []);
    assert.equal(worker.processed, 3);
    const results = await Promise.all(pushed.jids.map((jid) => client.result(jid)));
    assert.deepEqual(results.map((r) => r.result), [{ n: 0 }, { n: 1 }, { n: 2 }]);
  });
});

describe("Worker shutdown and leases", () => {
  /** A handler that runs until its signal is aborted. */
  const untilAborted = (started: string[]) => (_args: unknown[], { job, signal }: JobContext) =>
    new Promise<void>((resolve) => {
      started.push(job.jid);
      signal.addEventListener("abort", () => resolve(), { once: true });
    });

  it("cuts the shutdown grace short on a second signal, or a stop with a shorter grace", async () => {
    for (const second of ["signal", "terminate"]) {
      const queue = uniqueQueue();
      const started: string[] = [];
      const before = process.listeners("SIGTERM");
      const worker = new Worker({ ...quietErrors, handleSignals: true, queues: [queue], fetchWait: 1, shutdownGraceMs: 20_000 });
      worker.register("long", untilAborted(started));
      const job = await client.push({ jobtype: "long", queue, retry: 3 });
      let stopped = false;
      const running = worker.run().then(() => void (stopped = true));
      let cut = 0;
      try {
        await eventually(() => started.length === 1, 10_000, "the job to start");
        // The worker's own listener, called as a signal would (emitting SIGTERM would reach the test runner's too).
        const onSignal = process.listeners("SIGTERM").find((listener) => !before.includes(listener)) as () => void;
        onSignal();
        await sleep(300);
        assert.equal(stopped, false, "the first signal gives the job its grace");
        cut = Date.now();
        if (second === "signal") onSignal();
        else worker.terminate();
        await Promise.race([running, sleep(3_000)]);
      } finally {
        worker.terminate();
        await running;
      }
      assert.ok(Date.now() - cut < 3_000, `${second}: stopped ${Date.now() - cut} ms after the second stop`);
      assert.equal((await failureOf(job.jid))?.errtype, "WorkerShutdown");
    }
  });

  it("keeps a job fetched again while its earlier attempt still runs, and fails it at shutdown", async () => {
    const queue = uniqueQueue();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let firstDone = false;
    const started: string[] = [];
    const worker = new Worker({ ...quietErrors, queues: [queue], concurrency: 2, fetchWait: 1 });
    worker.register("stubborn", async (args, ctx) => {
      if (started.length === 0) {
        started.push(ctx.job.jid);
        await gate; // ignores its signal: runs on after its lease was taken away
        firstDone = true;
        return;
      }
      await untilAborted(started)(args, ctx);
    });
    const job = await client.push({ jobtype: "stubborn", queue, retry: 3 });
    await during(worker, async () => {
      await eventually(() => started.length === 1, 10_000, "the first attempt");
      await client.killJob(job.jid);
      await client.retryJob(job.jid);
      await eventually(() => started.length === 2, 10_000, "the second attempt");
      assert.deepEqual(worker.runningJids, [job.jid, job.jid]);
      release();
      await eventually(() => firstDone, 5_000, "the first attempt to end");
      await sleep(300); // its ack is refused (the lease is gone) and it is cleaned up
      assert.deepEqual(worker.runningJids, [job.jid], "the second attempt is still the worker's");
    });
    const stored = await client.get(job.jid);
    assert.equal(stored.failure?.errtype, "WorkerShutdown");
    assert.notEqual(stored.state, "active");
  });

  it("tries a failed lease extension again before the next regular one", async () => {
    const queue = uniqueQueue();
    const own = new Client({ url: URL_ });
    const extend = own.extend.bind(own);
    const calls: number[] = [];
    own.extend = (jid, lease, options) => {
      calls.push(Date.now());
      return calls.length === 1 ? Promise.reject(unreachable()) : extend(jid, lease, options);
    };
    // extendAt 0.04 of 60 s: an extension every 2.4 s; a failed one is tried again after 1.2 s.
    const worker = new Worker({ ...quietErrors, onError: () => undefined, client: own, queues: [queue], fetchWait: 1, extendAt: 0.04 });
    worker.register("long", () => eventually(() => calls.length >= 2, 8_000, "a second extension"));
    await client.push({ jobtype: "long", queue, reserve_for: 60 });
    await during(worker, async () => {
      await eventually(() => worker.processed === 1, 12_000, "the job");
    }, 25_000);
    const gap = calls[1]! - calls[0]!;
    assert.ok(gap < 1_800, `tried again after ${gap} ms`);
  });
});

describe("Worker defaults and long polls", () => {
  it("long-polls 25 s and extends a lease every third of reserve_for by default, as the Python worker does", async () => {
    const queue = uniqueQueue();
    const own = new Client({ url: URL_ });
    const fetch = own.fetch.bind(own);
    const waits: Array<number | undefined> = [];
    // A reservation of 0.9 s (the server's are a minute or more): extended after 0.3 s, and again.
    const job = { jid: newJid(), jobtype: "slow", args: [], queue, reserve_for: 0.9, lease: "lease", attempt: 1, custom: {} } as unknown as FetchedJob;
    own.fetch = (request, signal) => (waits.push(request.wait), waits.length === 1 ? Promise.resolve([job]) : fetch(request, signal));
    const extended: number[] = [];
    own.extend = async () => (extended.push(Date.now()), {} as ExtendResult);
    own.ackMany = async (acks) => ({ acked: acks.map((ack) => ack.jid), lease_lost: [] });
    const worker = new Worker({ ...quietErrors, client: own, queues: [queue] });
    worker.register("slow", () => sleep(900));
    await during(worker, async () => {
      await eventually(() => worker.processed === 1, 5_000, "the job");
    });
    assert.equal(waits[0], 25);
    assert.ok(extended.length >= 2, `${extended.length} extensions in 0.9 s`);
  });

  it("ends a 25 s long poll under way at once on stop, quiet or SIGTERM", async () => {
    for (const how of ["stop", "quiet", "signal"]) {
      const queue = uniqueQueue();
      const own = new Client({ url: URL_ });
      const fetch = own.fetch.bind(own);
      let polls = 0;
      let ended = 0;
      own.fetch = (request, signal) => (polls++, fetch(request, signal).finally(() => (ended = Date.now())));
      const before = process.listeners("SIGTERM");
      const worker = new Worker({ ...quietErrors, handleSignals: how === "signal", client: own, queues: [queue] });
      worker.register("x", () => undefined);
      let stopped = false;
      const running = worker.run().then(() => void (stopped = true));
      try {
        await eventually(() => polls === 1, 5_000, "a long poll");
        await sleep(300); // at the server, waiting
        const asked = Date.now();
        if (how === "stop") worker.stop();
        else if (how === "quiet") worker.quiet();
        // The worker's own listener, called as a signal would (emitting SIGTERM would reach the test runner's too).
        else (process.listeners("SIGTERM").find((listener) => !before.includes(listener)) as () => void)();
        await eventually(() => ended > 0 && (how === "quiet" || stopped), 3_000, `${how} to end the long poll`);
        assert.ok(ended - asked < 2_000, `${how}: the long poll ended ${ended - asked} ms later`);
        if (how === "quiet") {
          const job = await client.push({ jobtype: "x", queue });
          await sleep(300);
          assert.equal(polls, 1, "a quiet worker fetches no more");
          assert.equal((await client.get(job.jid)).state, "available");
        }
      } finally {
        worker.stop(0);
        await running;
      }
    }
  });
});

describe("Worker settling while the server is unreachable", () => {
  it("keeps trying an ack the server could not take, until it does", async () => {
    const queue = uniqueQueue();
    const own = new Client({ url: URL_ });
    const ackMany = own.ackMany.bind(own);
    let down = 2;
    own.ackMany = (acks) => (down-- > 0 ? Promise.reject(unreachable()) : ackMany(acks));
    const errors: unknown[] = [];
    const worker = new Worker({ ...quietErrors, onError: (e) => errors.push(e), client: own, queues: [queue], fetchWait: 1 });
    worker.register("quick", () => "done");
    const job = await client.push({ jobtype: "quick", queue });
    await during(worker, async () => {
      await eventually(() => worker.processed === 1 || settleFailures(errors).length > 0, 10_000, "the ack");
    }, 25_000);
    assert.deepEqual(errors, []);
    assert.equal(worker.processed, 1);
    await assert.rejects(client.get(job.jid), JobNotFound);
  });

  it("keeps trying a failure report, while other jobs' reports go through", async () => {
    const queue = uniqueQueue();
    const own = new Client({ url: URL_ });
    const fail = own.fail.bind(own);
    const recorded: string[] = [];
    let down = 2;
    const [first, second] = (await client.pushMany([{ jobtype: "first", queue, retry: 3 }, { jobtype: "second", queue, retry: 3 }])).jids;
    own.fail = async (jid, lease, report) => {
      if (jid === first && down-- > 0) throw unreachable();
      const answer = await fail(jid, lease, report);
      recorded.push(jid);
      return answer;
    };
    const errors: unknown[] = [];
    const worker = new Worker({ ...quietErrors, onError: (e) => errors.push(e), client: own, queues: [queue], concurrency: 1, fetchWait: 1 });
    worker.register("first", () => {
      throw new Error("first");
    });
    worker.register("second", async () => {
      await sleep(100);
      throw new Error("second");
    });
    await during(worker, async () => {
      await eventually(() => recorded.length === 2 || settleFailures(errors).length > 0, 10_000, "both failures");
    }, 25_000);
    assert.deepEqual(errors, []);
    assert.deepEqual(recorded, [second, first], "the second job's failure did not wait for the first's");
    assert.equal((await failureOf(first!))?.message, "first");
  });

  it("tries an ack or a failure report again after an error answer retrying may fix (a 500, a 429)", async () => {
    const queue = uniqueQueue();
    const own = new Client({ url: URL_ });
    const ackMany = own.ackMany.bind(own);
    const fail = own.fail.bind(own);
    const refused = { ack: 0, fail: 0 };
    own.ackMany = (acks) =>
      refused.ack++ === 0 ? Promise.reject(new ServerError("boom", { code: "internal_error", status: 500 })) : ackMany(acks);
    own.fail = (jid, lease, report) =>
      refused.fail++ === 0 ? Promise.reject(new WerkError("slow down", { code: "http_429", status: 429 })) : fail(jid, lease, report);
    const errors: unknown[] = [];
    const worker = new Worker({ ...quietErrors, onError: (e) => errors.push(e), client: own, queues: [queue], fetchWait: 1 });
    worker.register("quick", () => "done");
    worker.register("boom", () => {
      throw new Error("boom");
    });
    const [done, failed] = (await client.pushMany([{ jobtype: "quick", queue }, { jobtype: "boom", queue, retry: 3 }])).jids;
    await during(worker, async () => {
      await eventually(() => refused.ack + refused.fail === 4 || settleFailures(errors).length > 0, 10_000, "the ack and the failure");
    }, 25_000);
    assert.deepEqual(errors, []);
    assert.equal(worker.processed, 1);
    await assert.rejects(client.get(done!), JobNotFound);
    assert.equal((await failureOf(failed!))?.message, "boom");
  });

  it("never tries a failure report again when sending it again cannot change the answer", async () => {
    for (const refusal of [new LeaseLost("", { code: "lease_lost", status: 409 }), new JobNotFound("", { code: "job_not_found", status: 404 }),
      new PayloadTooLarge("", { code: "payload_too_large", status: 413 })]) {
      const queue = uniqueQueue();
      const own = new Client({ url: URL_ });
      let tries = 0;
      own.fail = () => (tries++, Promise.reject(refusal));
      const worker = new Worker({ ...quietErrors, onError: () => undefined, client: own, queues: [queue], fetchWait: 1 });
      worker.register("boom", () => {
        throw new Error("boom");
      });
      await client.push({ jobtype: "boom", queue, retry: 3 });
      await during(worker, async () => {
        await eventually(() => tries > 0 && worker.runningJids.length === 0, 5_000, `${refusal.code}: the report to be given up`);
      });
      assert.equal(tries, 1, refusal.code);
    }
  });

  it("gives settling up after a few tries once stopping", async () => {
    const queue = uniqueQueue();
    const own = new Client({ url: URL_ });
    let tries = 0;
    own.fail = () => (tries++, Promise.reject(unreachable()));
    const errors: unknown[] = [];
    const worker = new Worker({ ...quietErrors, onError: (e) => errors.push(e), client: own, queues: [queue], fetchWait: 1 });
    worker.register("boom", () => {
      throw new Error("boom");
    });
    await client.push({ jobtype: "boom", queue, retry: 3 });
    const running = worker.run();
    let stopped = 0;
    try {
      await eventually(() => tries === 1, 10_000, "the first report");
    } finally {
      stopped = Date.now();
      worker.stop(0);
      await running;
    }
    assert.ok(Date.now() - stopped < 5_000, `stopped after ${Date.now() - stopped} ms`);
    assert.equal(tries, 3);
    assert.equal(settleFailures(errors).length, 1);
  });
});

describe("Client retries", () => {
  it("leaves no abort listener behind on the caller's signal", async () => {
    const down = new Client({ url: "http://127.0.0.1:1", retries: 2 });
    const controller = new AbortController();
    await assert.rejects(down.fetch({ queues: ["q"], wid: "w", wait: 0 }, controller.signal), Unavailable);
    assert.equal(getEventListeners(controller.signal, "abort").length, 0);
  });
});
