// Graphile Worker through its own API: WorkerUtils.addJob / addJobs to produce, run() to consume.
import { readFileSync } from "node:fs";

import { Logger, makeWorkerUtils, run } from "graphile-worker";

const TASK = "bench";

export async function open(options) {
  // Warnings and errors only: a line per job would be the logger's cost, not the queue's.
  const log = new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") process.stderr.write(`graphile ${level}: ${message}\n`);
  });
  const utils = await makeWorkerUtils({ connectionString: options.dsn, logger: log });
  await utils.migrate();
  const pkg = JSON.parse(readFileSync(new URL("node_modules/graphile-worker/package.json", import.meta.url)));
  return {
    versions: { "graphile-worker": pkg.version },
    push: (i) => utils.addJob(TASK, { i }),
    pushBatch: (first, count) =>
      utils.addJobs(Array.from({ length: count }, (_, k) => ({ identifier: TASK, payload: { i: first + k } }))),
    async startWorker(mode, onJob) {
      const { concurrency, ...worker } = mode === "throughput" ? options.work : options.latency;
      const runner = await run({
        connectionString: options.dsn,
        concurrency,
        noHandleSignals: true,
        logger: log,
        taskList: { [TASK]: async (payload) => onJob(payload.i) },
        preset: { worker },
      });
      return { stop: () => runner.stop() };
    },
    close: () => utils.release(),
  };
}
