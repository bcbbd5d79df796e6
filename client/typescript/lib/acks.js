import { MAX_BATCH } from "./client.js";
/**
 * Acks of completed jobs sent together (group commit): acks that arrive in the same turn of the
 * event loop, or while a batch is in flight, go out as one `POST /v1/ack`. Idle, that is one
 * request per job as before; busy, hundreds of jobs share one. Each caller awaits its own job's
 * outcome, so a job counts as done only once the server has confirmed it.
 */
export class AckBatcher {
    client;
    pending = [];
    flushing = false;
    constructor(client) {
        this.client = client;
    }
    /** Resolves true once acknowledged (with `result` when it is not undefined), false if the lease
     * was no longer ours; rejects with the client's error when the batch request failed (after its
     * retries). */
    ack(jid, lease, result) {
        return new Promise((resolve, reject) => {
            this.pending.push({ jid, lease, result, resolve, reject });
            if (!this.flushing) {
                this.flushing = true;
                setImmediate(() => void this.flush());
            }
        });
    }
    async flush() {
        try {
            while (this.pending.length > 0) {
                const batch = this.pending.splice(0, MAX_BATCH);
                try {
                    const answer = await this.client.ackMany(batch.map(item));
                    const acked = new Set(answer.acked);
                    for (const item of batch)
                        item.resolve(acked.has(item.jid));
                }
                catch (error) {
                    for (const item of batch)
                        item.reject(error);
                }
            }
        }
        finally {
            this.flushing = false;
        }
    }
}
function item({ jid, lease, result }) {
    return result === undefined || result === null ? { jid, lease } : { jid, lease, result };
}
