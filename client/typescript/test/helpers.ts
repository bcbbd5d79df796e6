import { randomBytes } from "node:crypto";
import { createServer } from "node:net";

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

/**
 * A server that reads each request and hangs up without answering (the request may have been
 * done), for tests of what a client sends again; `requests` counts what it read.
 */
export async function hangingUp(): Promise<{ url: string; requests: number; close(): void }> {
  const server = createServer((socket) => {
    let seen = "";
    socket.on("data", (chunk) => {
      seen += chunk.toString("latin1");
      if (seen.includes("\r\n\r\n")) {
        state.requests += 1;
        seen = "";
        socket.destroy();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  const state = { url: `http://127.0.0.1:${port}`, requests: 0, close: () => void server.close() };
  return state;
}
