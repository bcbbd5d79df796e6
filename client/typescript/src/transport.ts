import net from "node:net";
import tls from "node:tls";

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

// A connection idle longer than this is closed instead of reused: the server (or a proxy in
// between) may be closing it just as a request is written on it.
const KEEPALIVE_EXPIRY_MS = 5_000;
const MAX_IDLE = 20;
const MAX_HEAD = 65_536;

export class TimedOut extends Error {}

class ProtocolError extends Error {}

interface Waiter {
  resolve: (answer: Answer) => void;
  reject: (error: unknown) => void;
}

/** The first complete answer in `buf` and the pieces arrived after it (`more`; `size` bytes in
 * all, which only a body of known length may reach into): the answer, whether the connection may
 * serve another request, and how many bytes it took; while incomplete, how many bytes it needs
 * when the head says so (else 0). `eof`: the server closed the connection, which completes an
 * answer framed by the close. */
function takeAnswer(
  buf: Buffer, more: Buffer[], size: number, eof: boolean,
): { answer: Answer; keep: boolean; used: number } | number {
  let start = 0;
  for (;;) {
    const end = buf.indexOf("\r\n\r\n", start, "latin1");
    if (end < 0) {
      if (buf.length - start > MAX_HEAD) throw new ProtocolError("answer head too long");
      return 0;
    }
    // Header names are case-insensitive: the head is read lowercased, once, and the few fields
    // the client needs are looked up in it.
    const head = buf.toString("latin1", start, end).toLowerCase();
    const status = Number(head.slice(9, 12));
    if (!head.startsWith("http/1.") || !Number.isInteger(status) || status < 100) {
      throw new ProtocolError(`not an HTTP/1.x answer: ${JSON.stringify(head.slice(0, 40))}`);
    }
    const lengthField = field(head, "content-length");
    const length = lengthField === undefined ? -1 : Number(lengthField);
    const chunked = field(head, "transfer-encoding")?.includes("chunked") ?? false;
    const connection = field(head, "connection");
    let close = head.startsWith("http/1.0");
    if (connection?.includes("close")) close = true;
    else if (connection?.includes("keep-alive")) close = false;
    const retryAfter = field(head, "retry-after");
    const bodyStart = end + 4;
    if (status < 200) {
      start = bodyStart; // interim answers carry no body
      continue;
    }
    if (!chunked && length >= 0 && !Number.isSafeInteger(length)) throw new ProtocolError("bad content-length");
    let body: Buffer[];
    let used: number;
    let keep = !close;
    if (status === 204 || status === 304) {
      body = [];
      used = bodyStart;
    } else if (chunked) {
      const parsed = chunkedBody(buf, bodyStart);
      if (parsed === undefined) return 0;
      [body, used] = parsed;
    } else if (length >= 0) {
      used = bodyStart + length;
      if (size < used) return used;
      body = span([buf, ...more], bodyStart, used);
    } else {
      if (!eof) return 0;
      used = buf.length;
      body = span([buf], bodyStart, used);
      keep = false;
    }
    return { answer: { status, body, retryAfter }, keep, used };
  }
}

/** The value of header `name` in the lowercased answer head `head` (its last line of that name). */
function field(head: string, name: string): string | undefined {
  const at = head.lastIndexOf(`\r\n${name}:`);
  if (at < 0) return undefined;
  const from = at + name.length + 3;
  const to = head.indexOf("\r\n", from);
  return head.slice(from, to < 0 ? undefined : to).trim();
}

/** The bytes from `from` to `to` of `pieces` read as one, as pieces of them (none empty). */
function span(pieces: Buffer[], from: number, to: number): Buffer[] {
  const out: Buffer[] = [];
  let offset = 0;
  for (const piece of pieces) {
    const start = Math.max(from - offset, 0);
    const end = Math.min(to - offset, piece.length);
    if (end > start) out.push(start === 0 && end === piece.length ? piece : piece.subarray(start, end));
    offset += piece.length;
    if (offset >= to) break;
  }
  return out;
}

/** A complete chunked body starting at `pos`, and where it ends; undefined while incomplete. */
function chunkedBody(buf: Buffer, pos: number): [Buffer[], number] | undefined {
  const parts: Buffer[] = [];
  for (;;) {
    const nl = buf.indexOf("\r\n", pos, "latin1");
    if (nl < 0) return undefined;
    const size = parseInt(buf.toString("latin1", pos, nl).split(";", 1)[0] as string, 16);
    if (!Number.isInteger(size) || size < 0) throw new ProtocolError("bad chunk size line");
    if (size === 0) {
      const end = buf.indexOf("\r\n\r\n", nl, "latin1"); // the end of the (usually empty) trailers
      if (end < 0) return undefined;
      return [parts, end + 4];
    }
    if (buf.length < nl + 2 + size + 2) return undefined;
    parts.push(buf.subarray(nl + 2, nl + 2 + size));
    pos = nl + 2 + size + 2;
  }
}

class Connection {
  // What has arrived of the answer, in pieces. Until the head is complete they are joined at each
  // read (a head is small); a body of known length (`need`: the bytes of head and body) is left in
  // the pieces it arrives in.
  private parts: Buffer[] = [];
  private size = 0;
  private need = 0;
  private waiter: Waiter | undefined;
  closed = false;
  idleSince = 0;

  constructor(readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.on("data", (data: Buffer) => this.onData(data));
    socket.on("end", () => this.onClose(undefined));
    socket.on("close", () => this.onClose(undefined));
    socket.on("error", (error) => this.onClose(error));
  }

  /** Write one request; `waiter` hears its answer (or the failure). */
  send(request: string, waiter: Waiter): void {
    this.waiter = waiter;
    this.socket.ref();
    this.socket.write(request);
  }

  close(): void {
    this.closed = true;
    this.socket.destroy();
  }

  /** What is left of the exchange is abandoned (timeout, abort): the connection cannot be reused. */
  abandon(): void {
    this.waiter = undefined;
    this.close();
  }

  /** The answer completed and the connection may serve another request. */
  onAnswer: (connection: Connection) => void = () => undefined;

  private onData(data: Buffer): void {
    if (this.waiter === undefined) {
      this.close(); // nothing was asked: the connection cannot be trusted any more
      return;
    }
    this.parts.push(data);
    this.size += data.length;
    if (this.size >= this.need) this.parse(false);
  }

  private onClose(error: Error | undefined): void {
    const wasClosed = this.closed;
    this.closed = true;
    if (!wasClosed) this.socket.destroy();
    if (this.waiter === undefined) return;
    // An answer framed by the close (no length given) is complete now.
    if (error === undefined && this.size > 0 && this.parse(true)) return;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter.reject(error ?? new Error("the server closed the connection without a complete answer"));
  }

  /** True once the waiter has been answered. */
  private parse(eof: boolean): boolean {
    const waiter = this.waiter;
    if (waiter === undefined || this.size === 0) return false;
    // With `need` known, the first piece holds the whole head (it was joined until it did).
    if (this.need === 0 && this.parts.length > 1) this.parts = [Buffer.concat(this.parts, this.size)];
    const buf = this.parts[0] as Buffer;
    let taken;
    try {
      taken = takeAnswer(buf, this.parts.slice(1), this.size, eof);
    } catch (error) {
      this.waiter = undefined;
      this.close();
      waiter.reject(error);
      return true;
    }
    if (typeof taken === "number") {
      this.need = taken;
      return false;
    }
    this.waiter = undefined;
    const rest = this.size > taken.used;
    this.parts = [];
    this.size = 0;
    this.need = 0;
    if (!taken.keep || rest || eof) this.close();
    else {
      this.socket.unref();
      this.onAnswer(this);
    }
    waiter.resolve(taken.answer);
    return true;
  }
}

interface Deadline {
  at: number; // performance.now() milliseconds: a clock that never jumps
  expire: () => void;
}

/**
 * The timeouts of the exchanges in flight, kept by one timer armed for the earliest of them rather
 * than a timer per exchange: arming and clearing a timer costs more than the rest of a small
 * request's bookkeeping, and almost every exchange ends long before its timeout. The timer never
 * keeps the process alive (a connection waiting for its answer does).
 */
class Watchdog {
  private readonly deadlines = new Set<Deadline>();
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Infinity;

  watch(deadline: Deadline): void {
    this.deadlines.add(deadline);
    if (deadline.at < this.armedFor) this.arm(deadline.at);
  }

  forget(deadline: Deadline): void {
    this.deadlines.delete(deadline);
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(() => this.sweep(), Math.max(0, at - performance.now()));
    this.timer.unref();
  }

  private sweep(): void {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const deadline of this.deadlines) {
      if (deadline.at <= now) deadline.expire();
      else next = Math.min(next, deadline.at);
    }
    if (next < Infinity) this.arm(next);
  }
}

/** Keep-alive connections to one origin (`http:` or `https:`). */
export class Pool {
  private readonly idle: Connection[] = [];
  private readonly host: string;
  private readonly port: number;
  private readonly secure: boolean;
  private readonly servername: string | undefined;
  /** Written after the request line of every request: Host and the caller's fixed headers. */
  private readonly fixedHead: string;
  private readonly watchdog = new Watchdog();

  constructor(url: string, headers: Record<string, string>) {
    const parsed = new URL(url);
    this.secure = parsed.protocol === "https:";
    if (!this.secure && parsed.protocol !== "http:") throw new TypeError(`unsupported URL scheme: ${parsed.protocol}`);
    this.host = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
    this.port = Number(parsed.port) || (this.secure ? 443 : 80);
    this.servername = this.secure && net.isIP(this.host) === 0 ? this.host : undefined;
    let head = `host: ${parsed.host}\r\n`;
    for (const [name, value] of Object.entries(headers)) head += headerLine(name, value);
    this.fixedHead = head;
  }

  /**
   * One exchange: rejects on network errors (the request may or may not have been processed), with
   * `TimedOut` after `timeoutMs`, and when `signal` aborts. `path` is the request target.
   */
  request(
    method: string,
    path: string,
    payload: string | undefined,
    extraHeaders: Record<string, string> | undefined,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<Answer> {
    let head = `${method} ${path} HTTP/1.1\r\n${this.fixedHead}`;
    if (extraHeaders !== undefined) for (const [name, value] of Object.entries(extraHeaders)) head += headerLine(name, value);
    const request = payload === undefined ? `${head}\r\n` : `${head}content-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`;
    return new Promise<Answer>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason ?? new Error("aborted"));
        return;
      }
      const connection = this.take();
      let done = false;
      const finish = (error: unknown, answer?: Answer): void => {
        if (done) return;
        done = true;
        this.watchdog.forget(deadline);
        signal?.removeEventListener("abort", onAbort);
        if (answer !== undefined) resolve(answer);
        else {
          connection.abandon();
          reject(error);
        }
      };
      const deadline: Deadline = {
        at: performance.now() + timeoutMs,
        expire: () => finish(new TimedOut(`no answer within ${timeoutMs} ms`)),
      };
      this.watchdog.watch(deadline);
      const onAbort = (): void => finish(signal?.reason ?? new Error("aborted"));
      signal?.addEventListener("abort", onAbort, { once: true });
      connection.send(request, { resolve: (answer) => finish(undefined, answer), reject: (error) => finish(error) });
    });
  }

  /** Close the idle connections (those in use close when their answer is in). */
  close(): void {
    for (const connection of this.idle.splice(0)) connection.close();
  }

  private take(): Connection {
    const now = Date.now();
    for (;;) {
      const connection = this.idle.pop();
      if (connection === undefined) break;
      if (!connection.closed && now - connection.idleSince < KEEPALIVE_EXPIRY_MS) return connection;
      connection.close();
    }
    // Writes made before the connection is up are queued by the socket and sent once it is.
    const socket = this.secure
      ? tls.connect({ host: this.host, port: this.port, servername: this.servername, ALPNProtocols: ["http/1.1"] })
      : net.connect({ host: this.host, port: this.port });
    const connection = new Connection(socket);
    connection.onAnswer = (c) => this.release(c);
    return connection;
  }

  private release(connection: Connection): void {
    if (connection.closed || this.idle.length >= MAX_IDLE) {
      connection.close();
      return;
    }
    connection.idleSince = Date.now();
    this.idle.push(connection);
  }
}

function headerLine(name: string, value: string): string {
  if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) throw new TypeError(`invalid header ${JSON.stringify(name)}`);
  return `${name}: ${value}\r\n`;
}
