// The outbox pattern with node-postgres: an order and the job that mails its receipt are written
// in one transaction; then a worker applies the job's effect and acks it in one transaction.
//
//   WERK_URL=http://127.0.0.1:7420 DATABASE_URL=postgresql://app@db/shop node outbox.mjs
//
// DATABASE_URL's role needs werk_app (GRANT werk_app TO app) and its own tables.
import pg from "pg";
import { Client, transactionalAck } from "@werk/client";

const werk = new Client({ url: process.env.WERK_URL });
const db = new pg.Client({ connectionString: process.env.DATABASE_URL });
await db.connect();
try {
  await db.query("CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, email text)");
  await db.query("CREATE TABLE IF NOT EXISTS receipts (order_id int PRIMARY KEY)");

  // Enqueue inside the business transaction: the job exists if and only if the order does.
  await db.query("BEGIN");
  const { rows } = await db.query("INSERT INTO orders (email) VALUES ($1) RETURNING id", ["ada@example.com"]);
  const orderId = rows[0].id;
  await db.query("SELECT werk.push('send_receipt', $1::jsonb, $2::jsonb)", [
    JSON.stringify([orderId]),
    JSON.stringify({ queue: "mail" }),
  ]);
  await db.query("COMMIT");

  // Complete inside the side effect's transaction: exactly once.
  const [job] = await werk.fetch({ queues: ["mail"], wid: "example-node", wait: 5 });
  await transactionalAck(db, job, async (tx) => {
    await tx.query("INSERT INTO receipts (order_id) VALUES ($1)", [job.args[0]]);
  });
  console.log(`order ${orderId}: receipt recorded, job ${job.jid} acked`);
} finally {
  await db.end();
}
