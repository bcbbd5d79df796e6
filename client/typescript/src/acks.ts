import { MAX_BATCH, type Client } from "./client.js";

interface Pending {
  jid: string;
  lease: string;
  resolve: (acked: boolean) => void;
  reject: (error: unknown) => void;
}

/**
 * Acks of completed jobs sent together (group commit): acks that arrive in the same turn of the
 * event loop, or while a batch is in flight, go out as one `POST /v1/ack`. Idle, that is one
 * request per job as before; busy, hundreds of jobs share one. Each caller awaits its own job's
 * outcome, so a job counts as done only once the server has confirmed it.
 */
export class AckBatcher {
  private pending: Pending[] = [];
  private flushing = false;

  constructor(private readonly client: Client) {}

  /** Resolves true once acknowledged, false if the lease was no longer ours; rejects with the
   * client's error when the batch request failed (after its retries). */
  ack(jid: string, lease: string): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.pending.push({ jid, lease, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0, MAX_BATCH);
        try {
          const result = await this.client.ackMany(batch.map(({ jid, lease }) => ({ jid, lease })));
          const acked = new Set(result.acked);
          for (const item of batch) item.resolve(acked.has(item.jid));
        } catch (error) {
          for (const item of batch) item.reject(error);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}
