// Werk through its TypeScript client (client/typescript, compiled to dist/ by the harness):
// Client.push / pushMany to produce, Worker to consume, against the `werk serve` the harness runs.
import { Client, Worker, VERSION } from "../../../client/typescript/dist/src/index.js";

const QUEUE = "bench-peers";

export async function open(options) {
  const client = new Client({ url: options.url });
  return {
    versions: { "werk-client-node": VERSION },
    push: (i) => client.push({ jobtype: "noop", args: [i], queue: QUEUE }),
    pushBatch: (first, count) =>
      client.pushMany(Array.from({ length: count }, (_, k) => ({ jobtype: "noop", args: [first + k], queue: QUEUE }))),
    async startWorker(mode, onJob) {
      const settings = mode === "throughput" ? options.work : options.latency;
      const worker = new Worker({
        client,
        queues: [QUEUE],
        handleSignals: false,
        ...settings,
        handlers: { noop: async (args) => onJob(args[0]) },
      });
      const running = worker.run();
      return {
        async stop() {
          worker.stop();
          await running;
        },
      };
    },
    close: async () => undefined,
  };
}
