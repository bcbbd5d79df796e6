package werk

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
)

// TransactionalAck applies a job's side effect and acks the job in one transaction of the
// database Werk shares with the application (werk.ack of the SQL interface; the role of db's
// connections needs werk_app). It begins a transaction, runs apply, calls werk.ack and commits.
// When the lease is no longer the job's (it expired and the job went to another worker) it
// rolls back and returns an error that errors.Is matches with ErrLeaseLost; an error from apply
// rolls back too, and the job stays leased (fail it, or let the lease expire).
//
// WithResult(v) stores v with the job (pushed with keep_result_for) as TransactionalAck acks it.
//
// db is a database/sql pool over any PostgreSQL driver: pgx (github.com/jackc/pgx/v4/stdlib or
// v5/stdlib), lib/pq. With pgx's own API, run AckInTx's statement yourself:
// tx.QueryRow(ctx, "SELECT werk.ack($1, $2, $3::jsonb)", jid, lease, result).Scan(&acked).
func TransactionalAck(ctx context.Context, db *sql.DB, job Job, apply func(*sql.Tx) error, opts ...TxAckOption) error {
	var ack txAck
	for _, opt := range opts {
		opt(&ack)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this does nothing
	if err := apply(tx); err != nil {
		return err
	}
	if err := AckInTx(ctx, tx, job, ack.result); err != nil {
		return err
	}
	return tx.Commit()
}

// TxAckOption configures TransactionalAck.
type TxAckOption func(*txAck)

type txAck struct{ result any }

// WithResult makes TransactionalAck store result with the job. It is encoded once apply has
// returned, so a pointer to a value apply fills in (an id its INSERT returned) carries what apply
// produced.
func WithResult(result any) TxAckOption {
	return func(a *txAck) { a.result = result }
}

// AckInTx acks job inside tx (storing result, if not nil, with a job pushed with
// keep_result_for). A lost lease returns an error matching ErrLeaseLost: roll tx back.
func AckInTx(ctx context.Context, tx *sql.Tx, job Job, result any) error {
	if job.Lease == nil {
		return errors.New("werk: job " + job.JID + " carries no lease: pass a fetched job")
	}
	var encoded *string
	if result != nil {
		b, err := json.Marshal(result)
		if err != nil {
			return err
		}
		s := string(b)
		encoded = &s
	}
	var acked bool
	err := tx.QueryRowContext(ctx, "SELECT werk.ack($1, $2, $3::jsonb)", job.JID, *job.Lease, encoded).
		Scan(&acked)
	if err != nil {
		return err
	}
	if !acked {
		return &Error{Code: "lease_lost", Detail: "the lease on job " + job.JID +
			" is no longer current (it expired, or the job was settled)"}
	}
	return nil
}
