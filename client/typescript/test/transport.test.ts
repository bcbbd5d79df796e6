// The client's HTTP/1.1 framing against answers the Werk server itself does not send (chunked,
// framed by the close, interim 1xx, a closed keep-alive connection), from a plain node:http server
// or a raw TCP one standing in for a proxy between client and server.
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";

import { Client, Unavailable } from "../src/index.js";

function listen(server: net.Server): Promise<string> {
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
  });
}

describe("transport", () => {
  const seen: Array<{ method?: string; url?: string; body: string; headers: http.IncomingHttpHeaders }> = [];
  const httpServer = http.createServer((request, response) => {
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => {
      seen.push({ method: request.method, url: request.url, body, headers: request.headers });
      if (request.url === "/prefix/v1/info") {
        response.writeHead(200, { "content-type": "application/json" }); // no length: chunked
        response.write('{"version":');
        response.end('"chunked"}');
      } else if (request.url === "/prefix/v1/jobs") {
        response.writeHead(503, { "retry-after": "0", "content-type": "application/problem+json" });
        response.end(JSON.stringify({ code: "unavailable", detail: "busy" }));
      } else {
        response.writeHead(204);
        response.end();
      }
    });
  });
  let base = "";
  before(async () => {
    base = await listen(httpServer);
  });
  after(() => httpServer.close());

  it("reads chunked answers and sends the path prefix, body and headers", async () => {
    const client = new Client({ url: `${base}/prefix/`, token: "t0k" });
    assert.deepEqual(await client.info(), { version: "chunked" });
    await client.ack("j1", "l1"); // 204, no body
    const ack = seen.at(-1);
    assert.equal(ack?.url, "/prefix/v1/jobs/j1/ack");
    assert.deepEqual(JSON.parse(ack?.body ?? ""), { lease: "l1" });
    assert.equal(ack?.headers.authorization, "Bearer t0k");
    assert.equal(ack?.headers["content-type"], "application/json");
  });

  it("retries a 503 and then raises Unavailable with the server's code", async () => {
    const client = new Client({ url: `${base}/prefix`, retries: 1 });
    const before = seen.length;
    const error = await client.push({ jobtype: "x" }).catch((e: unknown) => e);
    assert.ok(error instanceof Unavailable);
    assert.equal(error.code, "unavailable");
    assert.equal(seen.length - before, 2);
  });

  it("reads interim answers, answers framed by the close, and reconnects after a close", async () => {
    let connections = 0;
    const raw = net.createServer((socket) => {
      connections++;
      socket.once("data", () => {
        // An HTTP/1.0 proxy's way: a 100 first, then an answer with no length, ended by the close.
        socket.end('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{"state":"quiet"}');
      });
    });
    const url = await listen(raw);
    try {
      const client = new Client({ url });
      assert.equal(await client.beat({ wid: "w" }), "quiet");
      assert.equal(await client.beat({ wid: "w" }), "quiet");
      assert.equal(connections, 2);
    } finally {
      raw.close();
    }
  });

  it("fails a request whose connection closes before the answer ends", async () => {
    const raw = net.createServer((socket) => {
      socket.once("data", () => socket.end("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"));
    });
    const url = await listen(raw);
    try {
      const client = new Client({ url, retries: 0 });
      await assert.rejects(client.info(), Unavailable);
    } finally {
      raw.close();
    }
  });

  it("times out and aborts", async () => {
    const raw = net.createServer(() => undefined); // never answers
    const url = await listen(raw);
    try {
      const client = new Client({ url, retries: 0, timeoutMs: 200 });
      await assert.rejects(client.info(), (e: unknown) => e instanceof Unavailable && /timed out/.test(e.message));
      const controller = new AbortController();
      const pending = client.fetch({ queues: ["q"], wid: "w", wait: 5 }, controller.signal);
      setTimeout(() => controller.abort(), 50);
      await assert.rejects(pending, (e: unknown) => (e as { code?: string }).code === "aborted");
    } finally {
      raw.close();
    }
  });

  it("times out each of many exchanges at its own deadline, and none answered in time", async () => {
    // Answers the requests whose path ends in /answer after 300 ms; the others never.
    const raw = net.createServer((socket) => {
      socket.once("data", (data) => {
        if (!data.toString("latin1").split("\r\n", 1)[0]?.includes("/answer")) return;
        setTimeout(() => socket.end("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"), 300);
      });
    });
    const url = await listen(raw);
    try {
      const client = new Client({ url, retries: 0, timeoutMs: 150 });
      const started = Date.now();
      const ended = (p: Promise<unknown>): Promise<number> =>
        p.then(() => -(Date.now() - started), () => Date.now() - started);
      // A long poll of 1 s is given 1 s on top of the client's timeout: 1.15 s in all.
      const [first, second, third, answered] = await Promise.all([
        ended(client.info()),
        ended(client.fetch({ queues: ["q"], wid: "w", wait: 1 })),
        ended(client.info()),
        ended(client.result("answer", { wait: 1 })),
      ]);
      assert.ok(first >= 140 && first < 400, `the first timed out after ${first} ms`);
      assert.ok(third >= 140 && third < 400, `the third timed out after ${third} ms`);
      assert.ok(second >= 1_140 && second < 1_400, `the long poll timed out after ${second} ms`);
      assert.ok(answered < 0, `the answered request failed after ${answered} ms`);
    } finally {
      raw.close();
    }
  });
});
