// pg-boss through its own API: send / insert to produce, work() to consume, one PgBoss instance.
import { readFileSync } from "node:fs";

import { PgBoss } from "pg-boss";

const QUEUE = "bench";

export async function open(options) {
  const boss = new PgBoss({ connectionString: options.dsn, useListenNotify: true });
  boss.on("error", (error) => process.stderr.write(`pg-boss error: ${error?.stack ?? error}\n`));
  await boss.start();
  // notify: workers are woken by LISTEN/NOTIFY when a job is created, not by their next poll.
  await boss.createQueue(QUEUE, { notify: true });
  const pkg = JSON.parse(readFileSync(new URL("node_modules/pg-boss/package.json", import.meta.url)));
  return {
    versions: { "pg-boss": pkg.version },
    push: (i) => boss.send(QUEUE, { i }),
    pushBatch: (first, count) =>
      boss.insert(QUEUE, Array.from({ length: count }, (_, k) => ({ data: { i: first + k } }))),
    async startWorker(mode, onJob) {
      const settings = mode === "throughput" ? options.work : options.latency;
      const id = await boss.work(QUEUE, settings, async (jobs) => {
        for (const job of jobs) onJob(job.data.i);
      });
      return { stop: () => boss.offWork(QUEUE, { id, wait: true }) };
    },
    close: () => boss.stop({ graceful: true, timeout: 5000 }),
  };
}
