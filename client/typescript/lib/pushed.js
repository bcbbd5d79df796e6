import { inspect } from "node:util";
/** The jobs of an answer as the server sent them: the bytes of their JSON array, in pieces. */
export class RawJobs {
    pieces;
    constructor(pieces) {
        this.pieces = pieces;
    }
    decode() {
        const bytes = this.pieces.length === 1 ? this.pieces[0] : Buffer.concat(this.pieces);
        // Wrapped as a member: the bytes end where the last array of the answer holding the last
        // jid's job ends, which is the jobs' own end unless a server adds a member after them.
        return JSON.parse(`{"jobs":${bytes.toString("utf8")}}`).jobs;
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
export function readPushed(body) {
    // Pieces are joined only around the cuts: from the start up to the jobs (the jids are there),
    // and the last piece (the last job and what follows the jobs) unless the cut is not in it.
    let front = body[0];
    let next = 1;
    if (front === undefined)
        return undefined;
    let key = front.indexOf(JOBS);
    while (key < 0 && next < body.length) {
        const searched = Math.max(0, front.length - JOBS.length + 1);
        front = Buffer.concat([front, body[next++]]);
        key = front.indexOf(JOBS, searched);
    }
    if (key < 0)
        return undefined;
    let answer;
    try {
        answer = JSON.parse(`${front.toString("utf8", 0, key)}"jobs":0}`);
    }
    catch {
        return undefined;
    }
    if (answer === null || typeof answer !== "object" || answer.jobs !== 0 || !Array.isArray(answer.jids))
        return undefined;
    const lastJid = answer.jids[answer.jids.length - 1];
    if (typeof lastJid !== "string")
        return undefined;
    // Searched from the end, so only the last job and what follows the jobs are passed over; a
    // match inside that job (an argument shaped like a job) fails the checks in `cut`.
    const needle = Buffer.from(`{"jid":${JSON.stringify(lastJid)},`);
    const start = key + JOBS.length - 1; // the jobs' opening bracket, in `front`
    const last = body[body.length - 1];
    let lastJob = next < body.length ? last.lastIndexOf(needle) : -1;
    let back; // holds the last job and the jobs' end
    let pieces; // the jobs' bytes before `back`
    let from; // where the jobs start in `back`
    if (lastJob >= 0) {
        back = last;
        pieces = [front.subarray(start), ...body.slice(next, -1)];
        from = 0;
    }
    else {
        back = next < body.length ? Buffer.concat([front, ...body.slice(next)]) : front;
        lastJob = back.lastIndexOf(needle);
        if (lastJob <= key)
            return undefined;
        pieces = [];
        from = start;
    }
    const after = cut(back, lastJob, answer);
    if (after < 0)
        return undefined;
    pieces.push(back.subarray(from, after));
    answer.jobs = new RawJobs(pieces);
    return answer;
}
/**
 * Where the jobs end in `bytes` (the last piece of an answer, or all of it), given where the last
 * job starts in it: the index just past their closing bracket, or -1 when that is not the end of
 * a top-level member. The members after the jobs are added to `answer`.
 */
function cut(bytes, lastJob, answer) {
    const lastJobEnd = objectEnd(bytes, lastJob);
    if (lastJobEnd < 0 || bytes[lastJobEnd + 1] !== CLOSE_BRACKET)
        return -1;
    const after = lastJobEnd + 2;
    if (bytes[after] === COMMA) {
        let rest;
        try {
            rest = JSON.parse(`{${bytes.toString("utf8", after + 1)}`);
        }
        catch {
            return -1;
        }
        Object.assign(answer, rest);
    }
    else if (after !== bytes.length - 1 || bytes[after] !== CLOSE_BRACE) {
        return -1;
    }
    return after;
}
/** Where the object starting at `start` ends (its closing brace), or -1. */
function objectEnd(bytes, start) {
    let depth = 0;
    for (let i = start; i < bytes.length; i++) {
        const c = bytes[i];
        if (c === QUOTE) {
            for (i++; i < bytes.length && bytes[i] !== QUOTE; i++)
                if (bytes[i] === BACKSLASH)
                    i++;
        }
        else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
            depth++;
        }
        else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && --depth === 0) {
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
export function withJobs(result, pages) {
    if (pages.every((page) => Array.isArray(page))) {
        result.jobs = [].concat(...pages);
        return result;
    }
    let jobs;
    const settle = (value) => {
        jobs = value;
        pages = []; // the answer's bytes are no longer needed
        // A frozen result keeps its getter, which answers with `jobs` from now on.
        if (Object.getOwnPropertyDescriptor(result, "jobs")?.configurable) {
            Object.defineProperty(result, "jobs", { value, writable: true, enumerable: true, configurable: true });
        }
    };
    // Shown by console.log and util.inspect as a plain result is, not as a getter.
    Object.defineProperty(result, inspect.custom, {
        value() {
            return { ...this };
        },
    });
    Object.defineProperty(result, "jobs", {
        enumerable: true,
        configurable: true,
        get() {
            if (jobs === undefined) {
                const decoded = pages.map((page) => (page instanceof RawJobs ? page.decode() : page));
                settle(decoded.length === 1 ? decoded[0] : [].concat(...decoded));
            }
            return jobs;
        },
        set(value) {
            settle(value);
        },
    });
    return result;
}
