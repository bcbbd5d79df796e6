package werk

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func runWorker(t *testing.T, w *Worker, until func() bool) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 20*time.Second, "the jobs", until)
	w.Terminate()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func failureOf(c *Client, jid string) *Failure {
	job, err := c.Get(context.Background(), jid)
	if err != nil || job.Failure == nil {
		return nil
	}
	return job.Failure
}

func TestTimeoutCancelsTheHandlerAndFailsWithTimeout(t *testing.T) {
	c := testClient(t)
	queue := uniqueQueue("go-to")
	w := quietWorker(c, queue)
	w.TimeoutGrace = 500 * time.Millisecond
	cancelled := make(chan struct{})
	w.Register("slow", func(ctx context.Context, job *Job) error {
		select {
		case <-ctx.Done():
			close(cancelled)
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return nil
		}
	}, WithTimeout(400*time.Millisecond))
	job, err := c.Push(context.Background(), JobSpec{JobType: "slow", Queue: queue, Retry: Int(1)})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w, func() bool { return failureOf(c, job.JID) != nil })
	f := failureOf(c, job.JID)
	if f.ErrType != "Timeout" || !strings.Contains(f.Message, "0.4s") {
		t.Fatalf("failure %+v", f)
	}
	<-cancelled
}

func TestTimeoutIgnoredStillFailsAtGraceAndFreesTheSlot(t *testing.T) {
	c := testClient(t)
	queue := uniqueQueue("go-to")
	w := quietWorker(c, queue)
	w.Concurrency = 1
	w.TimeoutGrace = 300 * time.Millisecond
	w.Register("stubborn", func(ctx context.Context, job *Job) error {
		time.Sleep(5 * time.Second) // ignores ctx
		return nil
	}, WithTimeout(300*time.Millisecond))
	var mu sync.Mutex
	ran := false
	w.Register("next", func(ctx context.Context, job *Job) error { mu.Lock(); ran = true; mu.Unlock(); return nil })
	stubborn, _ := c.Push(context.Background(), JobSpec{JobType: "stubborn", Queue: queue, Retry: Int(1)})
	_, _ = c.Push(context.Background(), JobSpec{JobType: "next", Queue: queue})
	started := time.Now()
	runWorker(t, w, func() bool { mu.Lock(); defer mu.Unlock(); return ran })
	if elapsed := time.Since(started); elapsed > 4500*time.Millisecond {
		t.Fatalf("the next job waited %v", elapsed)
	}
	if f := failureOf(c, stubborn.JID); f == nil || f.ErrType != "Timeout" {
		t.Fatalf("failure %+v", f)
	}
}

func TestCustomTimeoutOverridesAndIsChecked(t *testing.T) {
	c := testClient(t)
	queue := uniqueQueue("go-to")
	w := quietWorker(c, queue)
	w.TimeoutGrace = 200 * time.Millisecond
	w.Register("slow", func(ctx context.Context, job *Job) error {
		<-ctx.Done()
		return ctx.Err()
	}, WithTimeout(time.Minute))
	job, err := c.Push(context.Background(), JobSpec{JobType: "slow", Queue: queue, Retry: Int(1), Custom: map[string]any{"timeout": 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w, func() bool { return failureOf(c, job.JID) != nil })
	if f := failureOf(c, job.JID); f.ErrType != "Timeout" {
		t.Fatalf("failure %+v", f)
	}
	if _, err := c.Push(context.Background(), JobSpec{JobType: "x", ReserveFor: 60, Custom: map[string]any{"timeout": 61}}); err == nil || !strings.Contains(err.Error(), "reserve_for (60s)") {
		t.Fatalf("push: %v", err)
	}
	if _, err := c.PushMany(context.Background(), []JobSpec{{JobType: "x", Custom: map[string]any{"timeout": 3600}}}); err == nil || !strings.Contains(err.Error(), "reserve_for (1800s)") {
		t.Fatalf("push many: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Register accepted a week-long timeout")
		}
	}()
	w.Register("week", func(ctx context.Context, job *Job) error { return nil }, WithTimeout(7*24*time.Hour))
}

func TestMiddlewareHooksRetryInNoRetry(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-mw")
	w := quietWorker(c, queue)
	var mu sync.Mutex
	var events []string
	record := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	w.Use(func(next Handler) Handler {
		return func(ctx context.Context, job *Job) error {
			record("outer-before " + job.JID)
			err := next(ctx, job)
			record("outer-after " + job.JID)
			return err
		}
	}, func(next Handler) Handler {
		return func(ctx context.Context, job *Job) error {
			if len(job.Args) > 0 && job.Args[0] == "veto" {
				return errors.New("vetoed by middleware")
			}
			record("inner " + job.JID)
			return next(ctx, job)
		}
	})
	w.OnStartup(func(context.Context) error { record("startup"); return nil })
	w.OnShutdown(func(context.Context) error { record("shutdown"); return nil })
	w.Register("echo", func(ctx context.Context, job *Job) error { record("handler " + job.JID); return nil })
	w.Register("later", func(ctx context.Context, job *Job) error {
		return &RetryInError{Delay: time.Hour, Type: "RateLimited", Message: "rate limited"}
	})
	w.Register("never", func(ctx context.Context, job *Job) error { return NoRetry(errors.New("bad input")) })
	echo, _ := c.Push(ctx, JobSpec{JobType: "echo", Queue: queue})
	vetoed, _ := c.Push(ctx, JobSpec{JobType: "echo", Args: []any{"veto"}, Queue: queue, Retry: Int(1)})
	later, _ := c.Push(ctx, JobSpec{JobType: "later", Queue: queue})
	never, _ := c.Push(ctx, JobSpec{JobType: "never", Queue: queue})
	runWorker(t, w, func() bool {
		return w.Processed() == 1 && failureOf(c, vetoed.JID) != nil && failureOf(c, later.JID) != nil &&
			failureOf(c, never.JID) != nil
	})
	if f := failureOf(c, vetoed.JID); f == nil || f.Message != "vetoed by middleware" {
		t.Fatalf("vetoed: %+v", f)
	}
	laterJob, _ := c.Get(ctx, later.JID)
	if laterJob.State != "scheduled" || laterJob.Failure.ErrType != "RateLimited" || laterJob.Failure.NextAt == nil ||
		time.Until(*laterJob.Failure.NextAt) < 50*time.Minute {
		t.Fatalf("later: %+v %+v", laterJob, laterJob.Failure)
	}
	neverJob, _ := c.Get(ctx, never.JID)
	if neverJob.State != "dead" || neverJob.Failure.Message != "bad input" {
		t.Fatalf("never: %+v", neverJob)
	}
	mu.Lock()
	defer mu.Unlock()
	if events[0] != "startup" || events[len(events)-1] != "shutdown" {
		t.Fatalf("hooks: %v", events)
	}
	// Jobs run concurrently: the order is checked among the events of the one job that ran.
	var ran []string
	for _, e := range events {
		if strings.HasSuffix(e, " "+echo.JID) {
			ran = append(ran, strings.TrimSuffix(e, " "+echo.JID))
		}
	}
	if strings.Join(ran, "|") != "outer-before|inner|handler|outer-after" {
		t.Fatalf("middleware order: %v", events)
	}
}

func TestWeightedOrder(t *testing.T) {
	firsts := map[string]int{}
	for i := 0; i < 20000; i++ {
		firsts[weightedOrder([]string{"a", "b", "c"}, map[string]int{"a": 6, "b": 3})[0]]++
	}
	if share := float64(firsts["a"]) / 20000; share < 0.57 || share > 0.63 {
		t.Fatalf("a first %.3f", share)
	}
	if share := float64(firsts["c"]) / 20000; share < 0.07 || share > 0.13 {
		t.Fatalf("c first %.3f", share)
	}
	w := NewWorker(NewClient("http://127.0.0.1:1"), "a")
	w.Weights = map[string]int{"b": 2}
	w.IgnoreSignals = true
	if err := w.Run(context.Background()); err == nil {
		t.Fatal("weights naming an unknown queue were accepted")
	}
}
