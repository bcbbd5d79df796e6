// werk.TransactionalAck when the lease is lost meanwhile: prints "lease lost" if the error
// matches ErrLeaseLost (and the test checks that the effect was rolled back).
package main

import (
	"context"
	"database/sql"
	"errors"
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
	for _, stmt := range []string{
		"CREATE TABLE effects (jid text)",
		`SELECT werk.push('a', '[]', '{"queue": "lost"}')`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			log.Fatal(err)
		}
	}
	client := werk.NewClient(os.Getenv("WERK_URL"))
	jobs, err := client.Fetch(ctx, werk.FetchRequest{Queues: []string{"lost"}, WID: "w-lost", Wait: 5})
	if err != nil || len(jobs) != 1 {
		log.Fatalf("fetch: %v (%d jobs)", err, len(jobs))
	}
	job := jobs[0]
	if err := client.Ack(ctx, job.JID, *job.Lease); err != nil { // someone else completed it
		log.Fatal(err)
	}
	err = werk.TransactionalAck(ctx, db, job, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO effects VALUES ($1)", job.JID)
		return err
	})
	switch {
	case errors.Is(err, werk.ErrLeaseLost):
		fmt.Println("lease lost")
	case err == nil:
		fmt.Println("acked")
	default:
		fmt.Println(err)
	}
}
