// The outbox pattern with pgx (through database/sql): an order and the job that mails its
// receipt are written in one transaction; then a worker applies the job's effect and acks it in
// one transaction (werk.TransactionalAck).
//
//	WERK_URL=http://127.0.0.1:7420 DATABASE_URL=postgresql://app@db/shop go run .
//
// DATABASE_URL's role needs werk_app (GRANT werk_app TO app) and its own tables.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log"
	"os"

	_ "github.com/jackc/pgx/v4/stdlib"
	werk "github.com/werk-dev/werk/client/go"
)

func main() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	for _, ddl := range []string{
		"CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, email text)",
		"CREATE TABLE IF NOT EXISTS receipts (order_id int PRIMARY KEY)",
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			log.Fatal(err)
		}
	}

	// Enqueue inside the business transaction: the job exists if and only if the order does.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	var orderID int
	if err := tx.QueryRowContext(ctx, "INSERT INTO orders (email) VALUES ($1) RETURNING id",
		"ada@example.com").Scan(&orderID); err != nil {
		log.Fatal(err)
	}
	args, _ := json.Marshal([]int{orderID})
	if _, err := tx.ExecContext(ctx, "SELECT werk.push('send_receipt', $1::jsonb, $2::jsonb)",
		string(args), `{"queue": "mail"}`); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	// Complete inside the side effect's transaction: exactly once.
	client := werk.NewClient(os.Getenv("WERK_URL"))
	jobs, err := client.Fetch(ctx, werk.FetchRequest{Queues: []string{"mail"}, WID: "example-go", Wait: 5})
	if err != nil || len(jobs) != 1 {
		log.Fatalf("fetch: %v (%d jobs)", err, len(jobs))
	}
	job := jobs[0]
	order := int(job.Args[0].(float64)) // JSON numbers decode as float64
	err = werk.TransactionalAck(ctx, db, job, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO receipts (order_id) VALUES ($1)", order)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("order %d: receipt recorded, job %s acked\n", orderID, job.JID)
}
