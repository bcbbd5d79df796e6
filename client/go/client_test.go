package werk

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPushFetchExtendAck(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go")
	pushed, err := c.Push(ctx, JobSpec{JobType: "resize", Args: []any{1, "a"}, Queue: queue, Retry: Int(0)})
	if err != nil {
		t.Fatal(err)
	}
	if pushed.State != "available" || pushed.Retry != 0 || len(pushed.JID) != 28 {
		t.Fatalf("pushed %+v", pushed)
	}
	jobs, err := c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-client", Count: 5})
	if err != nil || len(jobs) != 1 || jobs[0].Lease == nil || jobs[0].Attempt != 1 {
		t.Fatalf("fetch: %v %+v", err, jobs)
	}
	job := jobs[0]
	ext, err := c.Extend(ctx, job.JID, *job.Lease, ExtendOptions{ReserveFor: 600, Progress: map[string]int{"step": 2}})
	if err != nil || ext.LeaseExpiresAt.Before(time.Now().Add(500*time.Second)) {
		t.Fatalf("extend: %v %+v", err, ext)
	}
	stored, _ := c.Get(ctx, job.JID)
	if string(stored.Progress) != `{"step": 2}` && string(stored.Progress) != `{"step":2}` {
		t.Fatalf("progress %s", stored.Progress)
	}
	if err := c.Ack(ctx, job.JID, *job.Lease); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, job.JID); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("get after ack: %v", err)
	}
}

func TestUniqueAndExpiringPush(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go")
	first, err := c.Push(ctx, JobSpec{JobType: "report", Args: []any{600}, Queue: queue, Unique: &Unique{For: 60}})
	if err != nil || first.Unique == nil || first.Unique.Until != "success" {
		t.Fatalf("first: %v %+v", err, first)
	}
	_, err = c.Push(ctx, JobSpec{JobType: "report", Args: []any{600.0}, Queue: queue, Unique: &Unique{}})
	e, ok := AsError(err)
	if !errors.Is(err, ErrNotUnique) || !ok || e.Status != 409 || e.ExistingJID != first.JID {
		t.Fatalf("second: %v", err)
	}
	same, err := c.Push(ctx, JobSpec{JobType: "report", Args: []any{600}, Queue: queue, Unique: &Unique{OnConflict: "existing"}})
	if err != nil || same.JID != first.JID || !same.Duplicate {
		t.Fatalf("existing: %v %+v", err, same)
	}
	many, err := c.PushMany(ctx, []JobSpec{{JobType: "a", Queue: queue}, {JobType: "report", Args: []any{600}, Queue: queue, Unique: &Unique{OnConflict: "existing"}}})
	if err != nil || len(many.Conflicts) != 1 || many.Conflicts[0].Index != 1 || many.Conflicts[0].ExistingJID != first.JID {
		t.Fatalf("batch: %v %+v", err, many)
	}
	expiring, err := c.Push(ctx, JobSpec{JobType: "soon", Queue: queue, ExpiresIn: 60})
	if err != nil || expiring.ExpiresAt == nil {
		t.Fatalf("expiring: %v %+v", err, expiring)
	}
}

func TestTypedErrors(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go")
	job, _ := c.Push(ctx, JobSpec{JobType: "x", Queue: queue})
	err := c.Ack(ctx, job.JID, "stale")
	e, ok := AsError(err)
	if !errors.Is(err, ErrLeaseLost) || !ok || e.Status != 409 || e.Code != "lease_lost" {
		t.Fatalf("ack with a stale lease: %v", err)
	}
	_, err = c.Push(ctx, JobSpec{JobType: "x", Queue: "no spaces", ReserveFor: 5})
	e, _ = AsError(err)
	if !errors.Is(err, ErrValidation) || len(e.Errors) != 2 || e.Errors[0].Loc != "queue" {
		t.Fatalf("invalid push: %v", err)
	}
	offline := NewClient("http://127.0.0.1:9")
	offline.Retries = 1
	if _, err := offline.Info(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("unreachable: %v", err)
	}
}

func TestPushManyAckManyAndLongPoll(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go")
	specs := make([]JobSpec, 1001)
	for i := range specs {
		specs[i] = JobSpec{JobType: "bulk", Args: []any{i}, Queue: queue}
	}
	res, err := c.PushMany(ctx, specs)
	if err != nil || res.Created != 1001 || len(res.Jobs) != 1001 {
		t.Fatalf("push many: %v created=%v", err, res)
	}
	known, fresh := res.Jobs[0].JID, queue+"-new"
	short, err := c.PushJIDs(ctx, []JobSpec{
		{JobType: "bulk", Args: []any{0}, Queue: queue, JID: known},
		{JobType: "bulk", Args: []any{"new"}, Queue: queue, JID: fresh},
	})
	if err != nil || short.Created != 1 || len(short.JIDs) != 2 || short.JIDs[0] != known ||
		short.JIDs[1] != fresh || len(short.Existed) != 1 || short.Existed[0] != known {
		t.Fatalf("push jids: %v %+v", err, short)
	}
	jobs, _ := c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-client", Count: 100})
	acks := make([]AckItem, len(jobs))
	for i, j := range jobs {
		acks[i] = AckItem{JID: j.JID, Lease: *j.Lease}
	}
	acked, err := c.AckMany(ctx, acks)
	if err != nil || len(acked.Acked) != 100 || len(acked.LeaseLost) != 0 {
		t.Fatalf("ack many: %v %+v", err, acked)
	}

	empty := uniqueQueue("go-poll")
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = c.Push(ctx, JobSpec{JobType: "late", Queue: empty})
	}()
	start := time.Now()
	got, err := c.Fetch(ctx, FetchRequest{Queues: []string{empty}, WID: "go-client", Wait: 10})
	if err != nil || len(got) != 1 || got[0].JobType != "late" || time.Since(start) > 9*time.Second {
		t.Fatalf("long poll: %v %+v after %s", err, got, time.Since(start))
	}
}
