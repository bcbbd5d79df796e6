// The TypeScript SDK's contract worker: the handlers every SDK's contract worker registers (see
// client/contract/README.md, "Worker scenarios"), configured from the environment.
import { NoRetry, RetryIn, Worker } from "../../typescript/lib/index.js";

const env = process.env;
const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });
let counter = 0;

const worker = new Worker({
  queues: env.QUEUES.split(","),
  weights: env.WEIGHTS ? JSON.parse(env.WEIGHTS) : undefined,
  concurrency: Number(env.CONCURRENCY ?? 5),
  fetchBatch: Number(env.FETCH_BATCH ?? 100),
  fetchWait: 1,
  beatIntervalMs: 500,
  shutdownGraceMs: Number(env.GRACE_MS ?? 5000),
  timeoutGraceMs: Number(env.TIMEOUT_GRACE_MS ?? 300),
});
worker.use(async (ctx, next) => {
  (ctx.job.custom.marks ??= []).push("outer");
  return next();
});
worker.use(async (ctx, next) => {
  ctx.job.custom.marks.push("inner");
  return next();
});
worker.register("echo", ([value]) => value);
worker.register("slow", async ([seconds], { signal }) => (await sleep(seconds * 1000, signal), "finished"), { timeout: 0.5 });
worker.register("stubborn", async ([seconds]) => (await sleep(seconds * 1000), "finished"), { timeout: 0.5 });
worker.register("sleep", async ([seconds], { signal }) => (await sleep(seconds * 1000, signal), "finished"));
worker.register("retry_in", ([seconds]) => {
  throw new RetryIn(seconds, "come back later", { errtype: "Later" });
});
worker.register("no_retry", () => {
  throw new NoRetry("cannot ever work", { errtype: "Hopeless" });
});
worker.register("marks", (_args, { job }) => job.custom.marks);
worker.register("resume", async (_args, { job, checkpoint }) => {
  if (job.progress == null) {
    await checkpoint({ step: 1 });
    throw new RetryIn(0, "checkpointed");
  }
  return job.progress;
});
worker.register("order", () => ++counter);
await worker.run();
