// Pushes jobs with the npm faktory-worker client, as its README shows.
// node push.js URL QUEUE  -> prints {"jids": [...], "rejected": {...}}
const faktory = require("faktory-worker");

async function main() {
  const [url, queue] = process.argv.slice(2);
  const client = await faktory.connect({ url });
  const jids = [];
  for (const args of [[1, "a"], [2, "b"]]) {
    const job = client.job("ok", ...args);
    job.queue = queue;
    jids.push(await job.push());
  }
  const boom = client.job("boom", "x");
  boom.queue = queue;
  boom.retry = 3;
  jids.push(await boom.push());
  const bulk = [3, 4].map((n) => {
    const job = client.job("ok", n);
    job.queue = queue;
    return job;
  });
  // One bad job in the batch: its jid is too short.
  const rejected = await client.pushBulk([
    ...bulk,
    { jid: "short", jobtype: "ok", args: [], queue },
  ]);
  jids.push(...bulk.map((j) => j.jid));
  const info = await client.info();
  await client.close();
  process.stdout.write(
    JSON.stringify({
      jids,
      rejected: Object.fromEntries(Object.entries(rejected).map(([k, v]) => [k, v.reason])),
      info,
    }),
  );
}

main().catch((err) => {
  process.stderr.write(`push failed: ${err && err.stack ? err.stack : err}\n`);
  process.exit(2);
});
