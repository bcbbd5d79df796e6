import { inspect } from "node:util";

import type { PushManyResult } from "./types.js";

/**
 * The answer to a batch push, read without building its jobs until someone reads them.
 *
 * Most of the answer is the stored jobs, an object of some twenty fields for each job pushed, and
 * a producer usually keeps only the jids, if anything. Parsing the whole answer would build all of
 * those objects, and decode all of its text, on every push; instead the jobs' bytes are set aside
 * and the rest of the answer parsed. `Client.pushMany` hands the jobs out parsed from those bytes
 * when `jobs` is first read, as the same plain objects a full parse gives.
 */

type Jobs = PushManyResult["jobs"];

/** The jobs of an answer as the server sent them: the bytes of their JSON array, in pieces. */
export class RawJobs {
  constructor(private readonly pieces: Buffer[]) {}

  decode(): Jobs {
    const bytes = this.pieces.length === 1 ? (this.pieces[0] as Buffer) : Buffer.concat(this.pieces);
    // Wrapped as a member: the bytes end where the last array of the answer holding the last
    // jid's job ends, which is the jobs' own end unless a server adds a member after them.
    return (JSON.parse(`{"jobs":${bytes.toString("utf8")}}`) as { jobs: Jobs }).jobs;
  }
}

const JOBS = Buffer.from('"jobs":[');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * A batch push's answer (its body in the pieces it arrived in) with its `jobs` as `RawJobs`;
 * undefined when the answer does not have the expected layout (it is then parsed whole). The
 * layout: compact JSON, the jobs a member of the top-level object after `jids`, the last job
 * starting with its jid, the last of `jids`. The two places it is cut are checked by parsing what is
 * around them: the text before `"jobs":` must make a whole object once the member is closed there
 * (so the member is top-level), and the text after the jobs' closing bracket, a whole object once
 * opened there (so that bracket ends a top-level member).
 */
export function readPushed(body: Buffer[]): unknown {
  // Pieces are joined only around the cuts: from the start up to the jobs (the jids are there),
  // and the last piece (the last job and what follows the jobs) unless the cut is not in it.
  let front = body[0];
  let next = 1;
  if (front === undefined) return undefined;
  let key = front.indexOf(JOBS);
  while (key < 0 && next < body.length) {
    const searched = Math.max(0, front.length - JOBS.length + 1);
    front = Buffer.concat([front, body[next++] as Buffer]);
    key = front.indexOf(JOBS, searched);
  }
  if (key < 0) return undefined;
  let answer: Record<string, unknown>;
  try {
    answer = JSON.parse(`${front.toString("utf8", 0, key)}"jobs":0}`) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (answer === null || typeof answer !== "object" || answer.jobs !== 0 || !Array.isArray(answer.jids)) return undefined;
  const lastJid: unknown = answer.jids[answer.jids.length - 1];
  if (typeof lastJid !== "string") return undefined;
  // Searched from the end, so only the last job and what follows the jobs are passed over; a
  // match inside that job (an argument shaped like a job) fails the checks in `cut`.
  const needle = Buffer.from(`{"jid":${JSON.stringify(lastJid)},`);
  const start = key + JOBS.length - 1; // the jobs' opening bracket, in `front`
  const last = body[body.length - 1] as Buffer;
  let lastJob = next < body.length ? last.lastIndexOf(needle) : -1;
  let back: Buffer; // holds the last job and the jobs' end
  let pieces: Buffer[]; // the jobs' bytes before `back`
  let from: number; // where the jobs start in `back`
  if (lastJob >= 0) {
    back = last;
    pieces = [front.subarray(start), ...body.slice(next, -1)];
    from = 0;
  } else {
    back = next < body.length ? Buffer.concat([front, ...body.slice(next)]) : front;
    lastJob = back.lastIndexOf(needle);
    if (lastJob <= key) return undefined;
    pieces = [];
    from = start;
  }
  const after = cut(back, lastJob, answer);
  if (after < 0) return undefined;
  pieces.push(back.subarray(from, after));
  answer.jobs = new RawJobs(pieces);
  return answer;
}

/**
 * Where the jobs end in `bytes` (the last piece of an answer, or all of it), given where the last
 * job starts in it: the index just past their closing bracket, or -1 when that is not the end of
 * a top-level member. The members after the jobs are added to `answer`.
 */
function cut(bytes: Buffer, lastJob: number, answer: Record<string, unknown>): number {
  const lastJobEnd = objectEnd(bytes, lastJob);
  if (lastJobEnd < 0 || bytes[lastJobEnd + 1] !== CLOSE_BRACKET) return -1;
  const after = lastJobEnd + 2;
  if (bytes[after] === COMMA) {
    let rest: unknown;
    try {
      rest = JSON.parse(`{${bytes.toString("utf8", after + 1)}`);
    } catch {
      return -1;
    }
    Object.assign(answer, rest);
  } else if (after !== bytes.length - 1 || bytes[after] !== CLOSE_BRACE) {
    return -1;
  }
  return after;
}

/** Where the object starting at `start` ends (its closing brace), or -1. */
function objectEnd(bytes: Buffer, start: number): number {
  let depth = 0;
  for (let i = start; i < bytes.length; i++) {
    const c = bytes[i];
    if (c === QUOTE) {
      for (i++; i < bytes.length && bytes[i] !== QUOTE; i++) if (bytes[i] === BACKSLASH) i++;
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth++;
    } else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && --depth === 0) {
      return i;
    }
  }
  return -1;
}

/**
 * `result` with its `jobs` made of `pages` (one per request), parsed when first read: `jobs` is
 * then an enumerable getter, in its place among the keys, that replaces itself with the array, so
 * the result reads, spreads, compares, serializes and prints as the plain object it was.
 */
export function withJobs(result: PushManyResult, pages: (RawJobs | Jobs)[]): PushManyResult {
  if (pages.every((page) => Array.isArray(page))) {
    result.jobs = ([] as Jobs).concat(...(pages as Jobs[]));
    return result;
  }
  let jobs: Jobs | undefined;
  const settle = (value: Jobs): void => {
    jobs = value;
    pages = []; // the answer's bytes are no longer needed
    // A frozen result keeps its getter, which answers with `jobs` from now on.
    if (Object.getOwnPropertyDescriptor(result, "jobs")?.configurable) {
      Object.defineProperty(result, "jobs", { value, writable: true, enumerable: true, configurable: true });
    }
  };
  // Shown by console.log and util.inspect as a plain result is, not as a getter.
  Object.defineProperty(result, inspect.custom, {
    value(this: PushManyResult): PushManyResult {
      return { ...this };
    },
  });
  Object.defineProperty(result, "jobs", {
    enumerable: true,
    configurable: true,
    get(): Jobs {
      if (jobs === undefined) {
        const decoded = pages.map((page) => (page instanceof RawJobs ? page.decode() : page));
        settle(decoded.length === 1 ? (decoded[0] as Jobs) : ([] as Jobs).concat(...decoded));
      }
      return jobs as Jobs;
    },
    set(value: Jobs) {
      settle(value);
    },
  });
  return result;
}
