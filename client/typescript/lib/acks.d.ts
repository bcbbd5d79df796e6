import { type Client } from "./client.js";
/**
 * Acks of completed jobs sent together (group commit): acks that arrive in the same turn of the
 * event loop, or while a batch is in flight, go out as one `POST /v1/ack`. Idle, that is one
 * request per job as before; busy, hundreds of jobs share one. Each caller awaits its own job's
 * outcome, so a job counts as done only once the server has confirmed it.
 */
export declare class AckBatcher {
    private readonly client;
    private pending;
    private flushing;
    constructor(client: Client);
    /** Resolves true once acknowledged (with `result` when it is not undefined), false if the lease
     * was no longer ours; rejects with the client's error when the batch request failed (after its
     * retries). */
    ack(jid: string, lease: string, result?: unknown): Promise<boolean>;
    private flush;
}
