// A batch push's answer is read without parsing its jobs until they are read (src/pushed.ts): the
// result must be the one a full parse gives, however the answer is laid out and however it arrives
// in pieces. A raw TCP server stands in for Werk, answering each batch with the jobs it was sent.
import assert from "node:assert/strict";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { inspect } from "node:util";

import { Client } from "../src/index.js";
import type { JobPush, PushManyResult } from "../src/index.js";

type Answer = Record<string, unknown>;

/** What the server answers a batch with, and how it writes it (pieces of at most `piece` bytes). */
let answerFor: (jobs: Answer[]) => Answer = storedAnswer;
let encode: (answer: Answer) => string = (answer) => JSON.stringify(answer);
let piece = Infinity;

function stored(job: Answer): Answer {
  const { jid, ...rest } = job;
  return { jid, ...rest, priority: 0, state: "available", created_at: "2026-12-07T15:05:12.193036Z", wid: null };
}

function storedAnswer(jobs: Answer[]): Answer {
  return { jids: jobs.map((j) => j.jid), created: jobs.length, existed: [], jobs: jobs.map(stored) };
}

/** What pushMany resolved with before it left the jobs unparsed: the answers merged, all parsed. */
function merged(answers: Answer[]): PushManyResult {
  const result: PushManyResult = { jids: [], created: 0, existed: [], jobs: [], conflicts: [], refs: {} };
  for (const answer of answers as unknown as PushManyResult[]) {
    for (const c of answer.conflicts ?? []) result.conflicts.push({ ...c, index: c.index + result.jids.length });
    result.jids.push(...answer.jids);
    result.existed.push(...answer.existed);
    result.jobs.push(...answer.jobs);
    result.created += answer.created;
    Object.assign(result.refs, answer.refs ?? {});
  }
  return result;
}

describe("batch push answers", () => {
  const sent: Answer[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    let buf = Buffer.alloc(0);
    socket.on("data", async (data: Buffer) => {
      buf = Buffer.concat([buf, data]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(buf.toString("latin1", 0, end))?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      const jobs = (JSON.parse(buf.toString("utf8", end + 4, end + 4 + length)) as { jobs: Answer[] }).jobs;
      buf = buf.subarray(end + 4 + length);
      const text = encode(answerFor(jobs));
      sent.push(JSON.parse(text) as Answer); // the answer as a full parse reads it
      const body = Buffer.from(text);
      socket.write(`HTTP/1.1 201 Created\r\ncontent-length: ${body.length}\r\ncontent-type: application/json\r\n\r\n`);
      for (let at = 0; at < body.length; at += piece) {
        socket.write(body.subarray(at, at + piece));
        // Mostly each piece in a read of its own.
        if (piece < Infinity) await new Promise((resolve) => setImmediate(resolve));
      }
    });
  });
  let client: Client;
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    client = new Client({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, retries: 0 });
  });
  after(() => {
    // The client keeps its connections for reuse; their ends here would keep the process alive.
    for (const socket of sockets) socket.destroy();
    server.close();
  });

  /** Pushes `jobs` once per way of reading a result, each untouched before, against a full parse. */
  async function check(jobs: JobPush[]): Promise<void> {
    const reads: Array<(result: PushManyResult) => unknown> = [
      (result) => inspect(result, { depth: 4 }),
      (result) => JSON.stringify(result),
      (result) => ({ ...result }),
      (result) => structuredClone(result),
      (result) => result,
    ];
    for (const read of reads) {
      sent.length = 0;
      const result = await client.pushMany(jobs);
      const expected = merged(sent);
      assert.deepStrictEqual(read(result), read(expected));
    }
  }

  const jobs = (count: number): JobPush[] => Array.from({ length: count }, (_, i) => ({ jobtype: "noop", args: [i], queue: "q" }));

  it("equal a full parse, whole or in pieces of any size", async () => {
    for (const [size, count] of [[Infinity, 300], [1, 3], [7, 20], [100, 300], [4096, 300]] as const) {
      piece = size;
      await check(jobs(count));
    }
    piece = Infinity;
  });

  it("across requests, with conflicts, refs and text a job could be mistaken in", async () => {
    answerFor = (sentJobs) => {
      const answer = storedAnswer(sentJobs);
      const last = sentJobs[sentJobs.length - 1] as Answer;
      // Strings hold brackets, quotes and more; in a request's worth of jobs, the last job's args
      // hold an object shaped like it.
      (answer.jobs as Answer[]).at(-1)!.args = ["]}", '"jobs":[', "\u2028é😀"];
      if (sentJobs.length === 1000) (answer.jobs as Answer[]).at(-1)!.args = [{ jid: last.jid, args: [] }];
      answer.conflicts = [{ index: 0, existing_jid: "held", on_conflict: "existing" }];
      answer.refs = { 'a]"}': "held", jobs: "x" };
      return answer;
    };
    for (const size of [Infinity, 999, 65_536]) {
      piece = size;
      await check(jobs(1001));
    }
    piece = Infinity;
    answerFor = storedAnswer;
  });

  it("equal a full parse when the answer is laid out otherwise", async () => {
    const layouts: Array<(answer: Answer) => string> = [
      (answer) => JSON.stringify(answer, null, 1), // not compact
      (answer) => JSON.stringify({ jobs: answer.jobs, ...answer }), // the jobs first
      (answer) => JSON.stringify({ ...answer, jobs: (answer.jobs as Answer[]).map(({ jid, ...rest }) => ({ ...rest, jid })) }), // jid last
      (answer) => `${JSON.stringify(answer)}\n`,
    ];
    for (const layout of layouts) {
      encode = layout;
      await check(jobs(5));
      await check([]);
    }
    encode = (answer) => JSON.stringify(answer);
  });

  it("keep the jobs parsed once read, and take a new value", async () => {
    const result = await client.pushMany(jobs(3));
    const first = result.jobs;
    assert.equal(result.jobs, first);
    assert.deepEqual(Object.keys(result), ["jids", "created", "existed", "jobs", "conflicts", "refs"]);
    result.jobs = [];
    assert.deepEqual(result.jobs, []);
    const frozen = Object.freeze(await client.pushMany(jobs(2)));
    assert.equal(frozen.jobs.length, 2);
    assert.equal(frozen.jobs, frozen.jobs);
  });
});
