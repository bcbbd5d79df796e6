/**
 * Exactly-once completion: a job's side effect and its ack in one transaction of the database
 * Werk shares with the application (`werk.ack` of the SQL interface; the connection's role
 * needs `werk_app`).
 *
 *   const job = (await client.fetch(["default"], { wid: "w1" }))[0];
 *   await transactionalAck(pgClient, job, async (db) => {
 *     await db.query("INSERT INTO invoices ...", [...]);
 *   });
 *
 * `db` is any node-postgres `Client` or `PoolClient` (no dependency on `pg`: anything with
 * `query(text, values)` will do). The helper runs BEGIN, your function, `werk.ack`, COMMIT. When
 * the lease is no longer the job's (it expired and the job went to another worker), it rolls
 * back and throws `LeaseLost`; an error from your function rolls back too, and the job stays
 * leased (fail it, or let the lease expire).
 */
import { LeaseLost } from "./errors.js";
export async function transactionalAck(db, job, apply, options = {}) {
    if (!job.lease)
        throw new TypeError(`job ${job.jid} carries no lease: pass a fetched job`);
    const result = options.result === undefined ? null : JSON.stringify(options.result);
    await db.query("BEGIN");
    try {
        const value = await apply(db);
        const { rows } = await db.query("SELECT werk.ack($1, $2, $3::jsonb) AS acked", [job.jid, job.lease, result]);
        if (rows[0]?.acked !== true) {
            throw new LeaseLost(`the lease on job ${job.jid} is no longer current (it expired, or the job was settled); the transaction was rolled back`, { code: "lease_lost" });
        }
        await db.query("COMMIT");
        return value;
    }
    catch (err) {
        await db.query("ROLLBACK");
        throw err;
    }
}
