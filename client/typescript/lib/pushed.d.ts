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
export declare class RawJobs {
    private readonly pieces;
    constructor(pieces: Buffer[]);
    decode(): Jobs;
}
/**
 * A batch push's answer (its body in the pieces it arrived in) with its `jobs` as `RawJobs`;
 * undefined when the answer does not have the expected layout (it is then parsed whole). The
 * layout: compact JSON, the jobs a member of the top-level object after `jids`, the last job
 * starting with its jid, the last of `jids`. The two places it is cut are checked by parsing what is
 * around them: the text before `"jobs":` must make a whole object once the member is closed there
 * (so the member is top-level), and the text after the jobs' closing bracket, a whole object once
 * opened there (so that bracket ends a top-level member).
 */
export declare function readPushed(body: Buffer[]): unknown;
/**
 * `result` with its `jobs` made of `pages` (one per request), parsed when first read: `jobs` is
 * then an enumerable getter, in its place among the keys, that replaces itself with the array, so
 * the result reads, spreads, compares, serializes and prints as the plain object it was.
 */
export declare function withJobs(result: PushManyResult, pages: (RawJobs | Jobs)[]): PushManyResult;
export {};
