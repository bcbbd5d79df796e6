package werk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestResultRoundTrip(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-r")
	pushed, err := c.Push(ctx, JobSpec{JobType: "report", Queue: queue, KeepResultFor: 60})
	if err != nil || pushed.KeepResultFor != 60 {
		t.Fatalf("push: %v %+v", err, pushed)
	}
	jobs, err := c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-results"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("fetch: %v %+v", err, jobs)
	}
	answer := make(chan *JobResult)
	go func() {
		r, err := c.Result(ctx, pushed.JID, 20)
		if err != nil {
			t.Error(err)
		}
		answer <- r
	}()
	time.Sleep(200 * time.Millisecond)
	started := time.Now()
	if err := c.AckResult(ctx, jobs[0].JID, jobs[0].LeaseToken(), map[string]any{"rows": 3}); err != nil {
		t.Fatal(err)
	}
	got := <-answer
	if time.Since(started) > 500*time.Millisecond {
		t.Fatalf("answered %v after the ack", time.Since(started))
	}
	if got == nil || !got.Done || got.State != "completed" || string(got.Result) != `{"rows":3}` || got.CompletedAt == nil {
		t.Fatalf("result %+v (%s)", got, got.Result)
	}
	gone, _ := c.Push(ctx, JobSpec{JobType: "report", Queue: queue})
	jobs, _ = c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-results"})
	if _, err := c.AckMany(ctx, []AckItem{{JID: jobs[0].JID, Lease: jobs[0].LeaseToken(), Result: "dropped"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Result(ctx, gone.JID, 0); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("result of a deleted job: %v", err)
	}
}

func TestWorkerSendsTheResultAHandlerSets(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-rw")
	pushed, err := c.Push(ctx, JobSpec{JobType: "double", Args: []any{21}, Queue: queue, KeepResultFor: 60})
	if err != nil {
		t.Fatal(err)
	}
	w := quietWorker(c, queue)
	w.Register("double", func(ctx context.Context, job *Job) error {
		job.SetResult(map[string]any{"answer": job.Args[0].(float64) * 2})
		return nil
	})
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	got, err := c.Result(ctx, pushed.JID, 20)
	w.Stop()
	<-done
	if err != nil || got.State != "completed" || string(got.Result) != `{"answer":42}` {
		t.Fatalf("result: %v %+v (%s)", err, got, got.Result)
	}
}

func TestWorkerBatchedAcksCarryResultsAndDropOnlyARefusedOne(t *testing.T) {
	c := testClient(t)
	counter := &countingTransport{next: c.HTTP.Transport}
	c.HTTP = &http.Client{Transport: counter}
	ctx := context.Background()
	queue := uniqueQueue("go-rb")
	specs := make([]JobSpec, 30)
	for i := range specs {
		specs[i] = JobSpec{JobType: "report", Args: []any{i}, Queue: queue, KeepResultFor: 60}
	}
	pushed, err := c.PushMany(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	w := quietWorker(c, queue)
	w.Concurrency = 30
	w.Register("report", func(ctx context.Context, job *Job) error {
		n := int(job.Args[0].(float64))
		if n == 7 { // over the server's result limit (64 KiB): refused, the job completes without it
			job.SetResult(strings.Repeat("x", 70_000))
		} else {
			job.SetResult(map[string]int{"n": n})
		}
		return nil
	})
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	got := make([]*JobResult, len(pushed.Jobs))
	for i, job := range pushed.Jobs {
		if got[i], err = c.Result(ctx, job.JID, 20); err != nil {
			t.Fatal(err)
		}
	}
	w.Stop()
	<-done
	if atomic.LoadInt32(&counter.batch) == 0 {
		t.Fatal("no batched ack")
	}
	for i, r := range got {
		want := fmt.Sprintf(`{"n":%d}`, i)
		if i == 7 {
			want = "null"
		}
		if r.State != "completed" || string(r.Result) != want {
			t.Fatalf("job %d: %s %s, want %s", i, r.State, r.Result, want)
		}
	}
	if w.Processed() != 30 {
		t.Fatalf("processed %d", w.Processed())
	}
}
