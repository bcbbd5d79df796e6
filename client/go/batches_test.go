package werk

import (
	"context"
	"errors"
	"testing"
)

func TestBatchCommitsAndReleasesOnSuccessOnce(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-b")
	callbacks := uniqueQueue("go-bcb")
	committed, err := c.Batch(ctx, BatchNew{Description: "go", OnSuccess: &JobSpec{JobType: "done", Queue: callbacks}},
		func(b *BatchHandle) error {
			job, err := b.Push(ctx, JobSpec{JobType: "t", Queue: queue})
			if err != nil || job.Batch != b.BID {
				t.Fatalf("push: %v %+v", err, job)
			}
			_, err = b.PushMany(ctx, []JobSpec{{JobType: "t", Queue: queue}})
			return err
		})
	if err != nil || committed.State != "committed" || committed.Total != 2 || committed.OnSuccess.State != "waiting" {
		t.Fatalf("batch: %v %+v", err, committed)
	}
	if _, err := c.Push(ctx, JobSpec{JobType: "t", Queue: queue, Batch: committed.BID}); !errors.Is(err, ErrBatchClosed) {
		t.Fatalf("late push: %v", err)
	}
	jobs, err := c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-batch", Count: 10})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("fetch: %v %+v", err, jobs)
	}
	// The first member adds work to its batch from inside.
	again, err := c.InBatch(ctx, jobs[0].Batch, func(b *BatchHandle) error {
		_, err := b.Push(ctx, JobSpec{JobType: "more", Queue: queue})
		return err
	})
	if err != nil || again.Total != 3 {
		t.Fatalf("in batch: %v %+v", err, again)
	}
	for _, j := range jobs {
		if err := c.Ack(ctx, j.JID, j.LeaseToken()); err != nil {
			t.Fatal(err)
		}
	}
	more, err := c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-batch", Count: 10})
	if err != nil || len(more) != 1 {
		t.Fatalf("fetch more: %v %+v", err, more)
	}
	if err := c.Ack(ctx, more[0].JID, more[0].LeaseToken()); err != nil {
		t.Fatal(err)
	}
	status, err := c.BatchStatus(ctx, committed.BID)
	if err != nil || status.State != "finished" || status.Succeeded != 3 {
		t.Fatalf("status: %v %+v", err, status)
	}
	cbs, err := c.Fetch(ctx, FetchRequest{Queues: []string{callbacks}, WID: "go-batch", Count: 10})
	if err != nil || len(cbs) != 1 || cbs[0].JobType != "done" {
		t.Fatalf("callbacks: %v %+v", err, cbs)
	}
	if _, err := c.BatchStatus(ctx, "b-nosuchbatch-go"); !errors.Is(err, ErrBatchNotFound) {
		t.Fatalf("not found: %v", err)
	}
}

func TestAChildBatchOpensFromItsParentsHandle(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-child")
	var child *BatchStatus
	parent, err := c.Batch(ctx, BatchNew{}, func(b *BatchHandle) error {
		if _, err := b.Push(ctx, JobSpec{JobType: "t", Queue: queue}); err != nil {
			return err
		}
		var err error
		child, err = b.Batch(ctx, BatchNew{Description: "child"}, func(cb *BatchHandle) error {
			_, err := cb.Push(ctx, JobSpec{JobType: "t", Queue: queue})
			return err
		})
		if err != nil || child.Parent != b.BID {
			t.Fatalf("child: %v %+v", err, child)
		}
		status, err := b.Status(ctx)
		if err != nil || status.Total != 2 {
			t.Fatalf("parent while open: %v %+v", err, status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-batch", Count: 10})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("fetch: %v %+v", err, jobs)
	}
	for _, j := range jobs {
		if err := c.Ack(ctx, j.JID, j.LeaseToken()); err != nil {
			t.Fatal(err)
		}
	}
	status, err := c.BatchStatus(ctx, parent.BID)
	if err != nil || status.State != "finished" || status.Succeeded != 2 {
		t.Fatalf("parent: %v %+v", err, status)
	}
}

// A server that reads each request and hangs up without answering: the request may have been
// done, so a batch's creation is not sent again (a second request would open a second batch),
// while a push (its jid minted here, so repeating it is harmless) is.
func TestCreateBatchIsNotSentAgainAfterALostAnswer(t *testing.T) {
	url, requests := hangingUp(t)
	c := NewClient(url)
	c.Retries = 2
	ctx := context.Background()
	if _, err := c.CreateBatch(ctx, BatchNew{Description: "once"}); err == nil {
		t.Fatal("created without an answer")
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("batch creation sent %d times", n)
	}
	if _, err := c.Push(ctx, JobSpec{JobType: "t"}); err == nil {
		t.Fatal("pushed without an answer")
	}
	if n := requests.Load(); n != 1+3 {
		t.Fatalf("push sent %d times", n-1)
	}
}
