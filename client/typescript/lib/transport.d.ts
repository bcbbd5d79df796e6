/**
 * HTTP/1.1 keep-alive connections to one Werk server.
 *
 * The client speaks to one origin, sends JSON and reads JSON, so it needs a small part of HTTP: a
 * request line, a few fixed headers, and answers framed by Content-Length or chunked (or, from an
 * HTTP/1.0 proxy, by the connection's close). node:http's request and answer objects (streams,
 * header validation, the agent's socket bookkeeping) cost a producer more CPU per push than the
 * rest of its work together; here a request is one socket write and its answer is parsed from the
 * bytes as they arrive. One request at a time per connection (no pipelining); idle connections are
 * reused newest first and do not keep the process alive.
 */
export interface Answer {
    status: number;
    /**
     * The body's bytes, in the pieces they arrived in (none: no body), left for the caller to join
     * and decode: a caller may need only part of a large answer, and joining its pieces would copy
     * all of it into memory just allocated, which costs more than the copy itself.
     */
    body: Buffer[];
    retryAfter: string | undefined;
}
export declare class TimedOut extends Error {
}
/** Keep-alive connections to one origin (`http:` or `https:`). */
export declare class Pool {
    private readonly idle;
    private readonly host;
    private readonly port;
    private readonly secure;
    private readonly servername;
    /** Written after the request line of every request: Host and the caller's fixed headers. */
    private readonly fixedHead;
    private readonly watchdog;
    constructor(url: string, headers: Record<string, string>);
    /**
     * One exchange: rejects on network errors (the request may or may not have been processed), with
     * `TimedOut` after `timeoutMs`, and when `signal` aborts. `path` is the request target.
     */
    request(method: string, path: string, payload: string | undefined, extraHeaders: Record<string, string> | undefined, timeoutMs: number, signal?: AbortSignal): Promise<Answer>;
    /** Close the idle connections (those in use close when their answer is in). */
    close(): void;
    private take;
    private release;
}
