import { randomBytes } from "node:crypto";

export const URL_ = process.env.WERK_URL ?? "http://127.0.0.1:7420";

/** A queue name no other test (or run) uses. */
export function uniqueQueue(prefix = "ts"): string {
  return `${prefix}-${randomBytes(5).toString("hex")}`;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Poll `check` until it returns true (or fail after `timeoutMs`). */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 15_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}
