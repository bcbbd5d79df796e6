package werk

// TransactionalAck over a database/sql driver standing in for PostgreSQL: what it sends to
// werk.ack, and when it commits. The real database is exercised by tests/e2e/clients
// (test_examples.py), which build programs against pgx.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"sync"
	"testing"
)

// ackDB records the werk.ack calls of its transactions and answers them with acked.
type ackDB struct {
	mu        sync.Mutex
	acked     bool
	calls     [][]driver.Value
	committed int
	rolled    int
}

var fakeAckDB = &ackDB{}

func init() { sql.Register("werk-fake-ack", fakeDriver{}) }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) { return fakeConn{}, nil }

type fakeConn struct{}

func (fakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not prepared") }
func (fakeConn) Close() error                        { return nil }
func (fakeConn) Begin() (driver.Tx, error)           { return fakeTx{}, nil }

func (fakeConn) QueryContext(_ context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if query != "SELECT werk.ack($1, $2, $3::jsonb)" {
		return nil, errors.New("unexpected query " + query)
	}
	values := make([]driver.Value, len(args))
	for i, a := range args {
		values[i] = a.Value
	}
	fakeAckDB.mu.Lock()
	defer fakeAckDB.mu.Unlock()
	fakeAckDB.calls = append(fakeAckDB.calls, values)
	return &boolRows{value: fakeAckDB.acked}, nil
}

type fakeTx struct{}

func (fakeTx) Commit() error {
	fakeAckDB.mu.Lock()
	defer fakeAckDB.mu.Unlock()
	fakeAckDB.committed++
	return nil
}

func (fakeTx) Rollback() error {
	fakeAckDB.mu.Lock()
	defer fakeAckDB.mu.Unlock()
	fakeAckDB.rolled++
	return nil
}

type boolRows struct {
	value bool
	done  bool
}

func (*boolRows) Columns() []string { return []string{"ack"} }
func (*boolRows) Close() error      { return nil }
func (r *boolRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	dest[0] = r.value
	return nil
}

func TestTransactionalAckCarriesAResult(t *testing.T) {
	db, err := sql.Open("werk-fake-ack", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	lease := "lease-1"
	job := Job{JID: "job-1", Lease: &lease}
	reset := func(acked bool) {
		fakeAckDB.mu.Lock()
		defer fakeAckDB.mu.Unlock()
		fakeAckDB.acked, fakeAckDB.calls, fakeAckDB.committed, fakeAckDB.rolled = acked, nil, 0, 0
	}

	// The result is encoded once apply has returned: what apply filled in is stored.
	reset(true)
	var invoice struct {
		ID int `json:"id"`
	}
	err = TransactionalAck(ctx, db, job, func(tx *sql.Tx) error { invoice.ID = 7; return nil }, WithResult(&invoice))
	if err != nil || len(fakeAckDB.calls) != 1 || fakeAckDB.committed != 1 {
		t.Fatalf("with a result: %v, calls %v, committed %d", err, fakeAckDB.calls, fakeAckDB.committed)
	}
	if call := fakeAckDB.calls[0]; call[0] != "job-1" || call[1] != "lease-1" || call[2] != `{"id":7}` {
		t.Fatalf("werk.ack%q", call)
	}

	reset(true)
	if err := TransactionalAck(ctx, db, job, func(tx *sql.Tx) error { return nil }); err != nil ||
		len(fakeAckDB.calls) != 1 || fakeAckDB.calls[0][2] != nil {
		t.Fatalf("without a result: %v, calls %v", err, fakeAckDB.calls)
	}

	reset(false)
	err = TransactionalAck(ctx, db, job, func(tx *sql.Tx) error { return nil }, WithResult("late"))
	if !errors.Is(err, ErrLeaseLost) || fakeAckDB.committed != 0 || fakeAckDB.rolled != 1 {
		t.Fatalf("lease lost: %v, committed %d, rolled back %d", err, fakeAckDB.committed, fakeAckDB.rolled)
	}

	reset(true)
	if err := TransactionalAck(ctx, db, job, func(tx *sql.Tx) error { return errors.New("no") }, WithResult(1)); err == nil ||
		len(fakeAckDB.calls) != 0 || fakeAckDB.rolled != 1 {
		t.Fatalf("apply failed: %v, calls %v", err, fakeAckDB.calls)
	}
}
