// A worker written with the npm faktory-worker client, as its README shows.
// node worker.js URL QUEUES(comma-separated) WID OUTFILE BEAT_SECONDS
// Handlers: `ok` appends its args to OUTFILE as a JSON line; `boom` throws.
const fs = require("fs");
const faktory = require("faktory-worker");

const [url, queues, wid, outfile, beat] = process.argv.slice(2);

faktory.register("ok", async (...args) => {
  fs.appendFileSync(outfile, JSON.stringify({ jobtype: "ok", args }) + "\n");
});
faktory.register("boom", async (...args) => {
  throw new Error(`node boom ${args[0]}`);
});

faktory
  .work({
    url,
    queues: queues.split(","),
    wid,
    concurrency: 2,
    beatInterval: Number(beat),
    timeout: 2,
  })
  .then((worker) => {
    worker.on("error", (err) => process.stderr.write(`worker error: ${err}\n`));
    process.stderr.write(`node worker ${wid} started\n`);
  })
  .catch((err) => {
    process.stderr.write(`node worker failed: ${err && err.stack ? err.stack : err}\n`);
    process.exit(2);
  });
