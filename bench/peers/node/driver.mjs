// The Node side of `python -m bench run peers`: one queue library (an adapter module) driven
// through the scenarios the harness asks for, one JSON command per stdin line, one JSON answer per
// stdout line. Producer and worker live in this one process, as the library's users run them.
//
//   node driver.mjs <pgboss|graphile|werk> '<options json>'
//
// An adapter exports `open(options)` resolving to
//   { versions, push(i), pushBatch(first, count), startWorker(mode, onJob), close() }
// where startWorker's mode is "throughput" or "latency", onJob(i) is called at the start of each
// job's handler, and the result has `stop()`.
import { createInterface } from "node:readline";
import { performance } from "node:perf_hooks";

const [adapterName, optionsJson] = process.argv.slice(2);
const adapter = await import(`./${adapterName}.mjs`);
const options = JSON.parse(optionsJson ?? "{}");
const peer = await adapter.open(options);

const reply = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const cpuSeconds = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const k = ((sorted.length - 1) * p) / 100;
  const lo = Math.floor(k);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (k - lo);
}

/** `jobs` single pushes from `inflight` concurrent loops. */
async function push(jobs, inflight) {
  let next = 0;
  const loop = async () => {
    while (next < jobs) await peer.push(next++);
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inflight }, loop));
  return { jobs, seconds: (performance.now() - t0) / 1e3 };
}

/** `jobs` jobs in batches of `size`, one batch at a time. */
async function batch(jobs, size) {
  const t0 = performance.now();
  for (let first = 0; first < jobs; first += size) await peer.pushBatch(first, Math.min(size, jobs - first));
  return { jobs, seconds: (performance.now() - t0) / 1e3 };
}

/** The worker drains `jobs` jobs pushed before it started: first handler start to last one. */
async function work(jobs) {
  let seen = 0;
  let first = 0;
  let last = 0;
  let done;
  const finished = new Promise((resolve) => (done = resolve));
  const worker = await peer.startWorker("throughput", () => {
    const now = performance.now();
    if (seen === 0) first = now;
    seen++;
    last = now;
    if (seen >= jobs) done();
  });
  const timeout = setTimeout(() => done(), 600_000);
  await finished;
  clearTimeout(timeout);
  await worker.stop();
  if (seen < jobs) throw new Error(`only ${seen} of ${jobs} jobs were handled`);
  return { jobs, seconds: (last - first) / 1e3, handled: seen };
}

/** One job every `intervalMs` into an idle worker: push call → handler start, per job. */
async function latency(jobs, intervalMs, settleMs) {
  const sent = new Array(jobs);
  const delays = [];
  let done;
  const finished = new Promise((resolve) => (done = resolve));
  const worker = await peer.startWorker("latency", (i) => {
    delays.push(performance.now() - sent[i]);
    if (delays.length >= jobs) done();
  });
  await sleep(settleMs); // the worker is listening / long-polling, idle
  const t0 = performance.now();
  const pushes = [];
  for (let i = 0; i < jobs; i++) {
    const wait = t0 + i * intervalMs - performance.now();
    if (wait > 0) await sleep(wait);
    sent[i] = performance.now();
    pushes.push(peer.push(i));
  }
  await Promise.all(pushes);
  const timeout = setTimeout(() => done(), 30_000);
  await finished;
  clearTimeout(timeout);
  await worker.stop();
  if (delays.length < jobs) throw new Error(`only ${delays.length} of ${jobs} jobs were handled`);
  delays.sort((a, b) => a - b);
  return {
    jobs,
    p50_ms: percentile(delays, 50),
    p99_ms: percentile(delays, 99),
    max_ms: delays[delays.length - 1],
  };
}

reply({ ready: true, versions: { node: process.version, ...peer.versions }, pid: process.pid });
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const command = JSON.parse(line);
  if (command.cmd === "exit") break;
  try {
    const cpu0 = cpuSeconds();
    let result;
    if (command.cmd === "push") result = await push(command.jobs, command.inflight);
    else if (command.cmd === "batch") result = await batch(command.jobs, command.size);
    else if (command.cmd === "seed") result = await batch(command.jobs, command.size);
    else if (command.cmd === "work") result = await work(command.jobs);
    else if (command.cmd === "latency") result = await latency(command.jobs, command.interval_ms, command.settle_ms);
    else throw new Error(`unknown command ${command.cmd}`);
    reply({ ok: true, ...result, driver_cpu_s: cpuSeconds() - cpu0 });
  } catch (error) {
    reply({ ok: false, error: String(error?.stack ?? error) });
  }
}
await peer.close();
process.exit(0);
