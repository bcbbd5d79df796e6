// Drives the Werk dashboard in headless Chromium (Debian's /usr/bin/chromium) with playwright-core.
// Run by tests/e2e/web/test_browser.py, which starts a server, seeds it and checks the results.
// Env: WERK_URL, WERK_TOKEN, WERK_DEAD_JID, WERK_XSS_JID, WERK_QUEUE, ARTIFACTS (screenshot dir).
// Prints one JSON line with what it saw; exits non-zero on a failed expectation.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const base = process.env.WERK_URL;
const token = process.env.WERK_TOKEN;
const deadJid = process.env.WERK_DEAD_JID;
const xssJid = process.env.WERK_XSS_JID;
const queue = process.env.WERK_QUEUE;
const artifacts = process.env.ARTIFACTS;
mkdirSync(artifacts, { recursive: true });

const seen = { pages: [], dialogs: [], consoleErrors: [], screenshots: [] };
function expect(condition, message) {
  if (!condition) throw new Error("expectation failed: " + message);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
try {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  page.on("dialog", async (dialog) => {
    seen.dialogs.push(dialog.message());
    await dialog.accept(); // our confirm() prompts; an XSS alert would be recorded here too
  });
  page.on("console", (msg) => {
    if (msg.type() === "error") seen.consoleErrors.push(msg.text());
  });

  async function shot(name) {
    const path = join(artifacts, name + ".png");
    await page.screenshot({ path, fullPage: true });
    seen.screenshots.push(path);
  }
  async function visit(path, name) {
    const response = await page.goto(base + path);
    expect(response.status() === 200, `${path} answered ${response.status()}`);
    seen.pages.push(path);
    await shot(name);
  }

  // 1. Not logged in: the dashboard sends us to the login form.
  await page.goto(base + "/");
  expect(new URL(page.url()).pathname === "/login", "redirected to /login, got " + page.url());
  await shot("01-login");
  await page.fill('input[name="token"]', "not-a-token");
  await page.click('form[action$="/login"] button[type="submit"]');
  expect((await page.textContent(".error")).includes("not valid"), "wrong token refused");

  // The refused login answered 401, which Chromium logs; only errors from here on count.
  seen.consoleErrors.length = 0;

  // 2. Log in with the admin token.
  await page.fill('input[name="token"]', token);
  await page.click('form[action$="/login"] button[type="submit"]');
  await page.waitForURL(base + "/");
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === "werk_session");
  expect(session && session.httpOnly && session.sameSite === "Strict", "session cookie flags");
  // Some work while the live graph polls (every 5 s): push, then ack most and fail a few.
  const api = (path, body) => fetch(base + path, {
    method: "POST", body: JSON.stringify(body),
    headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
  }).then(async (r) => {
    if (!r.ok) throw new Error(`${path} answered ${r.status}: ${await r.text()}`);
    return r.status === 204 ? null : r.json();
  });
  const points = () => page.evaluate(
    () => (document.getElementById("live-processed").getAttribute("points") || "").split(" ").filter(Boolean).length);
  for (let round = 0; round < 3; round++) {
    const before = await points();
    const jobs = Array.from({ length: 8 + 6 * round }, (_, i) => ({ jobtype: "Live", queue: "live", args: [i], retry: 0 }));
    await api("/v1/jobs/batch", { jobs });
    const fetched = (await api("/v1/fetch", { queues: ["live"], wid: "browser-worker", count: 100 })).jobs;
    for (const [i, job] of fetched.entries()) {
      if (i % 4 === 3) await api(`/v1/jobs/${job.jid}/fail`, { lease: job.lease, errtype: "Demo", message: "failing on purpose" });
      else await api(`/v1/jobs/${job.jid}/ack`, { lease: job.lease });
    }
    await page.waitForFunction((n) =>
      (document.getElementById("live-processed").getAttribute("points") || "").split(" ").filter(Boolean).length > n,
      before, { timeout: 20000 });
  }
  seen.pages.push("/");
  await shot("02-overview");
  await visit("/?days=7", "03-overview-7-days");

  // 3. Queues: pause one.
  await visit("/queues", "04-queues");
  await page.click(`form[action$="/actions/queues/${queue}/pause"] button`);
  await page.waitForSelector(".flash");
  expect((await page.textContent(".flash")).includes("Queue paused"), "pause confirmed");
  const row = page.locator("table.queues tr", { hasText: queue });
  expect((await row.textContent()).includes("paused"), "queue row shows paused");
  await shot("05-queue-paused");
  await visit(`/queues/${queue}`, "06-queue-browse");
  await visit(`/queues/${queue}?state=available&order=oldest`, "07-queue-browse-oldest");

  // 4. Dead: look at one dead job, then retry it.
  await visit("/dead", "08-dead");
  await page.click(`a[href$="/jobs/${deadJid}"]`);
  await page.waitForSelector("pre.backtrace");
  expect((await page.textContent("pre.backtrace")).includes("app/jobs.py:42"), "backtrace shown");
  await shot("08b-dead-job");
  await page.goto(base + "/dead");
  await page.check(`input[name="jid"][value="${deadJid}"]`);
  await page.click('form.jobs .actions button[value="retry"]:not(.all)');
  await page.waitForSelector(".flash");
  expect((await page.textContent(".flash")).includes("1 job(s) queued"), "retry confirmed");
  await shot("09-dead-after-retry");

  // 5. The other pages.
  await visit("/retries", "10-retries");
  await visit("/scheduled", "11-scheduled");
  await visit("/workers", "12-busy-workers");
  await visit(`/jobs/${encodeURIComponent(xssJid)}`, "13-job-with-script-args");
  const args = await page.textContent("pre.payload");
  expect(args.includes("<script>"), "the script tag is shown as text");
  expect(seen.dialogs.every((d) => !d.includes("pwned")), "no injected script ran");
  expect(seen.consoleErrors.length === 0, "no console errors (CSP violations): " + seen.consoleErrors.join(" | "));
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
}
