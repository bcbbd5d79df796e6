package werk

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func quietWorker(c *Client, queue string) *Worker {
	w := NewWorker(c, queue)
	w.FetchWait = 1
	w.IgnoreSignals = true
	w.Logger = log.New(io.Discard, "", 0)
	return w
}

func TestWorkerConcurrencyAndAck(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-w")
	specs := make([]JobSpec, 24)
	for i := range specs {
		specs[i] = JobSpec{JobType: "work", Args: []any{i}, Queue: queue}
	}
	if _, err := c.PushMany(ctx, specs); err != nil {
		t.Fatal(err)
	}
	w := quietWorker(c, queue)
	w.Concurrency = 6
	var active, peak int32
	var mu sync.Mutex
	var seen []int
	w.Register("work", func(ctx context.Context, job *Job) error {
		n := atomic.AddInt32(&active, 1)
		for {
			p := atomic.LoadInt32(&peak)
			if n <= p || atomic.CompareAndSwapInt32(&peak, p, n) {
				break
			}
		}
		time.Sleep(40 * time.Millisecond)
		mu.Lock()
		seen = append(seen, int(job.Args[0].(float64)))
		mu.Unlock()
		atomic.AddInt32(&active, -1)
		return nil
	})
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 20*time.Second, "24 jobs", func() bool { return w.Processed() == 24 })
	w.Stop()
	<-done
	sort.Ints(seen)
	for i, v := range seen {
		if v != i {
			t.Fatalf("seen %v", seen)
		}
	}
	if peak > 6 || peak < 2 {
		t.Fatalf("peak concurrency %d", peak)
	}
}

type declined struct{}

func (declined) Error() string   { return "card 4242 declined" }
func (declined) ErrType() string { return "PaymentDeclined" }

func TestWorkerFailuresAndPanics(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-w")
	failing, _ := c.Push(ctx, JobSpec{JobType: "boom", Queue: queue})
	panicking, _ := c.Push(ctx, JobSpec{JobType: "panic", Queue: queue})
	unknown, _ := c.Push(ctx, JobSpec{JobType: "nobody-handles-this", Queue: queue})
	w := quietWorker(c, queue)
	w.Register("boom", func(ctx context.Context, job *Job) error { return declined{} })
	w.Register("panic", func(ctx context.Context, job *Job) error { panic("kaboom") })
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 15*time.Second, "three failures", func() bool { return w.Failed() == 3 })
	w.Stop()
	<-done
	want := map[string]string{failing.JID: "PaymentDeclined", panicking.JID: "panic", unknown.JID: "UnknownJobType"}
	for jid, errtype := range want {
		job, err := c.Get(ctx, jid)
		if err != nil || job.State != "scheduled" || job.Failure == nil || job.Failure.ErrType != errtype {
			t.Fatalf("%s: %v %+v", errtype, err, job.Failure)
		}
	}
	job, _ := c.Get(ctx, panicking.JID)
	if len(job.Failure.Backtrace) == 0 || job.Failure.Message != "kaboom" {
		t.Fatalf("panic failure %+v", job.Failure)
	}
}

func TestWorkerExtendsLeasesAndCheckpoints(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-w")
	pushed, _ := c.Push(ctx, JobSpec{JobType: "long", Queue: queue, ReserveFor: 60})
	w := quietWorker(c, queue)
	w.ExtendAt = 0.02 // every 1.2 s
	var first, last time.Time
	var progress string
	w.Register("long", func(ctx context.Context, job *Job) error {
		first = *job.LeaseExpiresAt
		if err := Checkpoint(ctx, map[string]int{"rows": 10}); err != nil {
			return err
		}
		time.Sleep(2600 * time.Millisecond)
		stored, err := c.Get(ctx, job.JID)
		if err != nil {
			return err
		}
		last, progress = *stored.LeaseExpiresAt, string(stored.Progress)
		return nil
	})
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 15*time.Second, "the long job", func() bool { return w.Processed() == 1 })
	w.Stop()
	<-done
	if last.Sub(first) < 2*time.Second {
		t.Fatalf("lease moved by %s", last.Sub(first))
	}
	if progress != `{"rows": 10}` && progress != `{"rows":10}` {
		t.Fatalf("progress %s", progress)
	}
	if _, err := c.Get(ctx, pushed.JID); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("after ack: %v", err)
	}
}

func TestWorkerGivesUpAJobWhoseLeaseIsLost(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-w")
	pushed, _ := c.Push(ctx, JobSpec{JobType: "victim", Queue: queue})
	w := quietWorker(c, queue)
	var started, finished int32
	var checkpointErr, ctxErr error
	w.Register("victim", func(ctx context.Context, job *Job) error {
		atomic.StoreInt32(&started, 1)
		eventually(t, 10*time.Second, "the kill", func() bool {
			j, err := c.Get(ctx, job.JID)
			return err == nil && j.State == "dead"
		})
		checkpointErr = Checkpoint(ctx, map[string]int{"n": 1})
		ctxErr = ctx.Err()
		atomic.StoreInt32(&finished, 1)
		return nil
	})
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 10*time.Second, "the job to start", func() bool { return atomic.LoadInt32(&started) == 1 })
	resp, err := http.Post(c.URL+"/v1/jobs/"+pushed.JID+"/kill", "application/json", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("kill: %v %v", err, resp)
	}
	resp.Body.Close()
	eventually(t, 15*time.Second, "the handler to end", func() bool { return atomic.LoadInt32(&finished) == 1 })
	w.Stop()
	<-done
	if !errors.Is(checkpointErr, ErrLeaseLost) || ctxErr == nil {
		t.Fatalf("checkpoint %v, ctx %v", checkpointErr, ctxErr)
	}
	if w.Processed() != 0 || w.Failed() != 0 {
		t.Fatalf("processed %d failed %d", w.Processed(), w.Failed())
	}
	job, _ := c.Get(ctx, pushed.JID)
	if job.Failure == nil || job.Failure.ErrType != "Killed" {
		t.Fatalf("the job was touched: %+v", job.Failure)
	}
}

func TestWorkerObeysQuietAndTerminate(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-w")
	w := quietWorker(c, queue)
	w.BeatInterval = 100 * time.Millisecond
	var ran int32
	w.Register("x", func(ctx context.Context, job *Job) error { atomic.AddInt32(&ran, 1); return nil })
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	admin := func(action string) bool {
		resp, err := http.Post(c.URL+"/v1/workers/"+w.WID+"/"+action, "application/json", nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	eventually(t, 10*time.Second, "quiet accepted", func() bool { return admin("quiet") })
	eventually(t, 20*time.Second, "quiet", func() bool { return w.State() == StateQuiet })
	time.Sleep(1200 * time.Millisecond)
	_, _ = c.Push(ctx, JobSpec{JobType: "x", Queue: queue})
	time.Sleep(600 * time.Millisecond)
	if atomic.LoadInt32(&ran) != 0 {
		t.Fatal("a quiet worker fetched a job")
	}
	admin("terminate")
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("terminate did not stop the worker")
	}
}

func TestWorkerStopsGracefullyOnSIGTERM(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-w")
	fast, _ := c.Push(ctx, JobSpec{JobType: "sleep", Args: []any{500}, Queue: queue})
	slow, _ := c.Push(ctx, JobSpec{JobType: "sleep", Args: []any{20000}, Queue: queue})
	w := NewWorker(c, queue) // handles signals
	w.FetchWait = 1
	w.ShutdownGrace = 1500 * time.Millisecond
	w.Logger = log.New(io.Discard, "", 0)
	var started int32
	w.Register("sleep", func(ctx context.Context, job *Job) error {
		atomic.AddInt32(&started, 1)
		select {
		case <-time.After(time.Duration(job.Args[0].(float64)) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 15*time.Second, "both jobs started", func() bool { return atomic.LoadInt32(&started) == 2 })
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("SIGTERM did not stop the worker")
	}
	if _, err := c.Get(ctx, fast.JID); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("the fast job was not acked: %v", err)
	}
	left, err := c.Get(ctx, slow.JID)
	// Given up at shutdown: retried at once (retry_in 0), not after the backoff.
	if err != nil || left.State != "scheduled" || left.Failure == nil || left.Failure.ErrType != "WorkerShutdown" ||
		left.Failure.NextAt == nil || left.Failure.NextAt.After(left.Failure.FailedAt.Add(time.Second)) {
		t.Fatalf("the slow job: %v %+v", err, left)
	}
	if w.Processed() != 1 || w.Failed() != 1 {
		t.Fatalf("processed %d failed %d", w.Processed(), w.Failed())
	}
}

// A worker left at its defaults fetches and extends leases as the Python worker does.
func TestWorkerDefaultsAreThePythonWorkers(t *testing.T) {
	w := NewWorker(nil)
	w.defaults()
	if w.FetchWait != 25 || w.ExtendAt != 1.0/3 {
		t.Fatalf("FetchWait %v, ExtendAt %v", w.FetchWait, w.ExtendAt)
	}
}

// A lease is extended each time a third of its reservation has passed, however short.
func TestWorkerExtendsEveryThirdOfTheReservation(t *testing.T) {
	f := newFakeServer(t, fakeJob("long", "long", 1)) // extended every 1/3 s
	f.status = func(string, time.Duration, []byte) int { return http.StatusOK }
	w := quietWorker(NewClient(f.URL), "default")
	w.Register("long", func(context.Context, *Job) error { time.Sleep(900 * time.Millisecond); return nil })
	runFor(t, w, 5*time.Second, "the ack", func() bool { return f.count("ack") == 1 })
	if n := f.count("extend"); n < 2 {
		t.Fatalf("%d extensions in 0.9 s", n)
	}
}

// A long poll under way (25 s by default) ends at once when the worker is stopped or quieted.
func TestWorkerEndsALongPollUnderWayAtOnce(t *testing.T) {
	c := testClient(t)
	for _, how := range []string{"stop", "signal", "context", "quiet"} {
		t.Run(how, func(t *testing.T) {
			queue := uniqueQueue("go-poll")
			w := NewWorker(c, queue)
			w.IgnoreSignals = how != "signal"
			w.Logger = log.New(io.Discard, "", 0)
			var ran int32
			w.Register("x", func(context.Context, *Job) error { atomic.AddInt32(&ran, 1); return nil })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			defer func() {
				w.Terminate()
				<-done
			}()
			time.Sleep(500 * time.Millisecond) // the first fetch waits at the server
			switch how {
			case "stop":
				w.Stop()
			case "signal":
				if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			case "context":
				cancel()
			case "quiet":
				w.Quiet()
				// A long poll left waiting would lease this job.
				pushed, err := c.Push(context.Background(), JobSpec{JobType: "x", Queue: queue})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(500 * time.Millisecond)
				if job, err := c.Get(context.Background(), pushed.JID); err != nil || job.State != "available" || atomic.LoadInt32(&ran) != 0 {
					t.Fatalf("a quiet worker fetched the job: %v %s", err, stateOf(job))
				}
				return
			}
			select {
			case <-done:
				done <- nil // for the deferred wait
			case <-time.After(2 * time.Second):
				t.Fatalf("%s did not end the long poll", how)
			}
		})
	}
}

// Stop or Terminate before Run (as when Run was started in a goroutine that has not got there
// yet) makes Run return at once, without starting; the Run after that works as usual.
func TestStopBeforeRunMakesRunReturnAtOnce(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/beat":
			_, _ = w.Write([]byte(`{"state":"running"}`))
		case "/v1/fetch":
			time.Sleep(20 * time.Millisecond)
			_, _ = w.Write([]byte(`{"jobs":[]}`))
		default:
			http.Error(w, "unexpected", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	for _, stop := range []func(*Worker){(*Worker).Stop, (*Worker).Terminate} {
		w := quietWorker(NewClient(srv.URL), "q")
		var hooks atomic.Int32
		w.OnStartup(func(context.Context) error { hooks.Add(1); return nil })
		w.OnShutdown(func(context.Context) error { hooks.Add(1); return nil })
		stop(w)
		stop(w) // twice: still one Run
		done := make(chan error, 1)
		go func() { done <- w.Run(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run after a stop: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run after a stop did not return")
		}
		if n := requests.Load(); n != 0 || hooks.Load() != 0 {
			t.Fatalf("Run after a stop sent %d requests and ran %d hooks", n, hooks.Load())
		}

		// The stop was used up: the next Run works until stopped.
		go func() { done <- w.Run(context.Background()) }()
		eventually(t, 5*time.Second, "a fetch", func() bool { return requests.Load() >= 2 })
		select {
		case err := <-done:
			t.Fatalf("the second Run returned before it was stopped: %v", err)
		default:
		}
		stop(w)
		if err := <-done; err != nil || hooks.Load() != 2 {
			t.Fatalf("the second Run: %v, %d hooks", err, hooks.Load())
		}
		requests.Store(0)
	}
}
