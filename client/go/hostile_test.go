package werk

// The worker against hostile jobs and a server that goes away: handlers that return a typed nil,
// panic(nil) or call runtime.Goexit, failures over the server's limits, a retried job coming back
// to the same worker, a second signal during the drain, an outage while settling or extending.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// runFor runs w until until holds (within limit), then terminates it.
func runFor(t *testing.T, w *Worker, limit time.Duration, what string, until func() bool) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	defer func() {
		w.Terminate()
		<-done
	}()
	eventually(t, limit, what, until)
}

// expectFailure checks that the job was failed (and so retries) with errtype.
func expectFailure(t *testing.T, c *Client, jid, errtype string) *Failure {
	t.Helper()
	job, err := c.Get(context.Background(), jid)
	if err != nil || job.State != "scheduled" || job.Failure == nil || job.Failure.ErrType != errtype {
		var failure any
		if job != nil {
			failure = job.Failure
		}
		t.Fatalf("want a %s failure: %v %s %+v", errtype, err, stateOf(job), failure)
	}
	return job.Failure
}

func stateOf(job *Job) string {
	if job == nil {
		return "(none)"
	}
	return job.State
}

// nilDeref's Error dereferences its receiver: a nil *nilDeref returned as an error panics there.
type nilDeref struct{ msg string }

func (e *nilDeref) Error() string { return e.msg }

func TestWorkerFailsATypedNilError(t *testing.T) {
	c := testClient(t)
	queue := uniqueQueue("go-nilerr")
	pushed, _ := c.Push(context.Background(), JobSpec{JobType: "nil", Queue: queue})
	w := quietWorker(c, queue)
	w.Register("nil", func(ctx context.Context, job *Job) error {
		var e *nilDeref
		return e
	})
	runFor(t, w, 5*time.Second, "the failure", func() bool { return w.Failed() == 1 })
	f := expectFailure(t, c, pushed.JID, "werk.nilDeref")
	if !strings.Contains(f.Message, "*werk.nilDeref") {
		t.Fatalf("message %q", f.Message)
	}
}

func TestWorkerFailsPanicNil(t *testing.T) {
	c := testClient(t)
	queue := uniqueQueue("go-panicnil")
	pushed, _ := c.Push(context.Background(), JobSpec{JobType: "p", Queue: queue})
	w := quietWorker(c, queue)
	w.Register("p", func(ctx context.Context, job *Job) error { panic(nil) })
	runFor(t, w, 5*time.Second, "the attempt to settle", func() bool { return w.Failed()+w.Processed() == 1 })
	if w.Processed() != 0 {
		t.Fatal("a handler that panicked with nil was acked")
	}
	if f := expectFailure(t, c, pushed.JID, "panic"); f.Message != "panic called with nil argument" {
		t.Fatalf("message %q", f.Message)
	}
}

func TestWorkerFailsAHandlerThatCallsGoexit(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-goexit")
	plain, _ := c.Push(ctx, JobSpec{JobType: "exit", Queue: queue})
	timed, _ := c.Push(ctx, JobSpec{JobType: "exit", Queue: queue, Custom: map[string]any{"timeout": 20}})
	w := quietWorker(c, queue)
	w.Register("exit", func(ctx context.Context, job *Job) error {
		runtime.Goexit()
		return nil
	})
	runFor(t, w, 5*time.Second, "both failures", func() bool { return w.Failed() == 2 })
	for _, jid := range []string{plain.JID, timed.JID} {
		if f := expectFailure(t, c, jid, "Goexit"); !strings.Contains(f.Message, "runtime.Goexit") {
			t.Fatalf("message %q", f.Message)
		}
	}
}

// typedErr's ErrType is whatever it is told.
type typedErr struct{ errtype, msg string }

func (e typedErr) Error() string   { return e.msg }
func (e typedErr) ErrType() string { return e.errtype }

// Failures over the server's limits are trimmed (as the Python worker trims them), not refused.
func TestWorkerTrimsFailuresToTheServersLimits(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-limits")
	kinds := []string{"long", "nul", "errtype", "panic", "later"}
	jids := map[string]string{}
	for _, kind := range kinds {
		pushed, err := c.Push(ctx, JobSpec{JobType: kind, Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		jids[kind] = pushed.JID
	}
	w := quietWorker(c, queue)
	w.Register("long", func(context.Context, *Job) error { return errors.New(strings.Repeat("x", 100_000)) })
	w.Register("nul", func(context.Context, *Job) error { return typedErr{"Nul\x00Type", "a\x00b"} })
	w.Register("errtype", func(context.Context, *Job) error { return typedErr{strings.Repeat("E", 300), "long errtype"} })
	w.Register("panic", func(context.Context, *Job) error { panic(strings.Repeat("p", 100_000)) })
	w.Register("later", func(context.Context, *Job) error { return RetryIn(2*365*24*time.Hour, errors.New("much later")) })
	runFor(t, w, 10*time.Second, "five failures", func() bool { return w.Failed() == 5 })

	if f := expectFailure(t, c, jids["long"], "errors.errorString"); f.Message != strings.Repeat("x", 4000) {
		t.Fatalf("long message: %d characters", len(f.Message))
	}
	if f := expectFailure(t, c, jids["nul"], `Nul\x00Type`); f.Message != `a\x00b` {
		t.Fatalf("NUL message %q", f.Message)
	}
	expectFailure(t, c, jids["errtype"], strings.Repeat("E", 200))
	if f := expectFailure(t, c, jids["panic"], "panic"); f.Message != strings.Repeat("p", 4000) {
		t.Fatalf("panic message: %d characters", len(f.Message))
	}
	f := expectFailure(t, c, jids["later"], "errors.errorString")
	if wait := f.NextAt.Sub(f.FailedAt); wait < 364*24*time.Hour || wait > 366*24*time.Hour {
		t.Fatalf("retried after %v, want the longest the server takes (a year)", wait)
	}
}

func TestSanitizedCountsCharactersNotBytes(t *testing.T) {
	report := sanitized(FailReport{Message: strings.Repeat("é", 5000), Backtrace: []string{"a\x00", strings.Repeat("ü", 3000)}})
	if n := utf8.RuneCountInString(report.Message); n != 4000 || !utf8.ValidString(report.Message) {
		t.Fatalf("message of %d characters", n)
	}
	if report.ErrType != "error" || report.Backtrace[0] != `a\x00` || utf8.RuneCountInString(report.Backtrace[1]) != 2000 {
		t.Fatalf("%q %q %d", report.ErrType, report.Backtrace[0], len(report.Backtrace[1]))
	}
}

// A job killed and retried while its old attempt still runs can come back to the same worker:
// the old attempt's end must not hide the new one from the shutdown, which fails it.
func TestWorkerFailsARetriedJobsNewAttemptAtShutdown(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-again")
	pushed, _ := c.Push(ctx, JobSpec{JobType: "twice", Queue: queue})
	w := quietWorker(c, queue)
	w.ShutdownGrace = 300 * time.Millisecond
	var attempts int32
	release := make(chan struct{})
	w.Register("twice", func(ctx context.Context, job *Job) error {
		if atomic.AddInt32(&attempts, 1) == 1 {
			<-release // the old attempt: knows nothing of the kill
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 5*time.Second, "the first attempt", func() bool { return atomic.LoadInt32(&attempts) == 1 })
	if _, err := c.KillJob(ctx, pushed.JID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RetryJob(ctx, pushed.JID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the second attempt", func() bool { return atomic.LoadInt32(&attempts) == 2 })
	close(release)
	eventually(t, 5*time.Second, "the first attempt to end", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.handling == 1
	})
	time.Sleep(300 * time.Millisecond) // its ack (refused: the lease is the new attempt's) and cleanup
	w.Stop()
	<-done
	expectFailure(t, c, pushed.JID, ShutdownErrType)
	if w.Failed() != 1 || w.Processed() != 0 {
		t.Fatalf("failed %d processed %d", w.Failed(), w.Processed())
	}
}

// blocker is a worker whose job blocks until its ctx is done, and the job.
func blocker(t *testing.T, c *Client, grace time.Duration) (*Worker, string, *int32) {
	t.Helper()
	queue := uniqueQueue("go-cut")
	pushed, _ := c.Push(context.Background(), JobSpec{JobType: "block", Queue: queue})
	w := quietWorker(c, queue)
	w.ShutdownGrace = grace
	var started int32
	w.Register("block", func(ctx context.Context, job *Job) error {
		atomic.StoreInt32(&started, 1)
		<-ctx.Done()
		return ctx.Err()
	})
	return w, pushed.JID, &started
}

func returnsWithin(t *testing.T, done <-chan error, limit time.Duration, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s did not cut the shutdown grace", what)
	}
}

func TestTerminateCutsTheGraceOfADrainUnderWay(t *testing.T) {
	c := testClient(t)
	w, jid, started := blocker(t, c, 30*time.Second)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 5*time.Second, "the job to start", func() bool { return atomic.LoadInt32(started) == 1 })
	w.Stop()
	time.Sleep(300 * time.Millisecond) // the drain is waiting
	w.Terminate()
	returnsWithin(t, done, 3*time.Second, "Terminate")
	expectFailure(t, c, jid, ShutdownErrType)
}

func TestSecondSignalCutsTheGrace(t *testing.T) {
	c := testClient(t)
	w, jid, started := blocker(t, c, 30*time.Second)
	w.IgnoreSignals = false
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 5*time.Second, "the job to start", func() bool { return atomic.LoadInt32(started) == 1 })
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "the first signal", func() bool { return w.State() == StateTerminate })
	time.Sleep(300 * time.Millisecond) // the drain is waiting
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	returnsWithin(t, done, 3*time.Second, "a second SIGTERM")
	expectFailure(t, c, jid, ShutdownErrType)
}

// A worker stopped by Stop leaves no goroutine behind waiting for signals.
func TestRunLeavesNoSignalGoroutine(t *testing.T) {
	c := testClient(t)
	count := func() int {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "(*Worker).Run.func")
	}
	before := count()
	w := quietWorker(c, uniqueQueue("go-sig"))
	w.IgnoreSignals = false
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	time.Sleep(200 * time.Millisecond)
	w.Stop()
	<-done
	eventually(t, 2*time.Second, "Run's goroutines to end", func() bool { return count() == before })
}

// A custom.timeout under a nanosecond still limits the attempt.
func TestTinyTimeoutStillLimits(t *testing.T) {
	c := testClient(t)
	queue := uniqueQueue("go-tiny")
	pushed, err := c.Push(context.Background(), JobSpec{JobType: "slow", Queue: queue, Custom: map[string]any{"timeout": 1e-10}})
	if err != nil {
		t.Fatal(err)
	}
	w := quietWorker(c, queue)
	w.TimeoutGrace = 200 * time.Millisecond
	w.Register("slow", func(ctx context.Context, job *Job) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(3 * time.Second):
			return nil
		}
	})
	runFor(t, w, 6*time.Second, "the attempt to settle", func() bool { return w.Failed()+w.Processed() == 1 })
	expectFailure(t, c, pushed.JID, TimeoutErrType)
}

// panicky JSON: encoding it panics.
type panickyJSON struct{}

func (panickyJSON) MarshalJSON() ([]byte, error) { panic("no JSON today") }

func TestWorkerAcksAResultThatPanicsToEncodeWithoutIt(t *testing.T) {
	c := testClient(t)
	queue := uniqueQueue("go-result")
	pushed, _ := c.Push(context.Background(), JobSpec{JobType: "r", Queue: queue})
	w := quietWorker(c, queue)
	w.Register("r", func(ctx context.Context, job *Job) error {
		job.SetResult(panickyJSON{})
		return nil
	})
	runFor(t, w, 5*time.Second, "the ack", func() bool { return w.Processed() == 1 })
	if _, err := c.Get(context.Background(), pushed.JID); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("not acked: %v", err)
	}
}

// fakeServer hands out jobs once and answers settles and extensions as settle says.
type fakeServer struct {
	*httptest.Server
	mu      sync.Mutex
	jobs    []map[string]any
	fetched time.Time
	calls   map[string][]time.Time // action ("ack", "fail", "extend") -> when each was answered 200
	bodies  map[string][]string    // and the bodies of those requests
	refused map[string]int
	// status: how the server answers action (body: the request's) at elapsed since the jobs
	// were fetched; a status of problemCodes answers as a server would, anything else is taken as 200.
	status func(action string, elapsed time.Duration, body []byte) int
}

// The codes a server answers with, by status.
var problemCodes = map[int]string{
	http.StatusServiceUnavailable:    "database_unavailable",
	http.StatusUnprocessableEntity:   "invalid_request",
	http.StatusInternalServerError:   "internal_error",
	http.StatusTooManyRequests:       "too_many_auth_failures",
	http.StatusConflict:              "lease_lost",
	http.StatusNotFound:              "job_not_found",
	http.StatusRequestEntityTooLarge: "payload_too_large",
}

// down answers 503 while unavailable says so.
func down(unavailable func(action string, elapsed time.Duration) bool) func(string, time.Duration, []byte) int {
	return func(action string, elapsed time.Duration, _ []byte) int {
		if unavailable(action, elapsed) {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
}

func newFakeServer(t *testing.T, jobs ...map[string]any) *fakeServer {
	f := &fakeServer{jobs: jobs, calls: map[string][]time.Time{}, bodies: map[string][]string{}, refused: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func fakeJob(jid, jobtype string, reserveFor int) map[string]any {
	return map[string]any{"jid": jid, "jobtype": jobtype, "args": []any{}, "queue": "default",
		"reserve_for": reserveFor, "retry": 25, "custom": map[string]any{}, "state": "active", "attempt": 1,
		"created_at": time.Now().UTC().Format(time.RFC3339Nano), "lease": "lease-" + jid}
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	f.mu.Lock()
	defer f.mu.Unlock()
	answer := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch path := r.URL.Path; {
	case path == "/v1/beat":
		answer(map[string]string{"state": "running"})
		return
	case path == "/v1/fetch":
		if len(f.jobs) == 0 {
			f.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			f.mu.Lock()
			answer(map[string]any{"jobs": []any{}})
			return
		}
		f.fetched = time.Now()
		answer(map[string]any{"jobs": f.jobs})
		f.jobs = nil
		return
	default:
		action := path[strings.LastIndex(path, "/")+1:]
		data, _ := io.ReadAll(r.Body)
		if status := f.status(action, time.Since(f.fetched), data); problemCodes[status] != "" {
			f.refused[action]++
			w.WriteHeader(status)
			answer(map[string]any{"code": problemCodes[status], "status": status})
			return
		}
		f.calls[action] = append(f.calls[action], time.Now())
		f.bodies[action] = append(f.bodies[action], string(data))
		var body struct {
			Acks []AckItem `json:"acks"`
		}
		_ = json.Unmarshal(data, &body)
		acked := []string{}
		for _, item := range body.Acks {
			acked = append(acked, item.JID)
		}
		answer(map[string]any{"acked": acked, "lease_lost": []string{}, "jid": "j", "state": "scheduled",
			"next_at": nil, "lease_expires_at": time.Now().UTC().Format(time.RFC3339Nano)})
	}
}

func (f *fakeServer) count(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls[action])
}

// A server away for a few seconds (a restart) when the worker settles: the ack and the failure
// are sent again until it is back, not given up after the client's quick retries.
func TestWorkerSettlesThroughAServerRestart(t *testing.T) {
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			f := newFakeServer(t, fakeJob("ok", "ok", 60), fakeJob("bad", "bad", 60))
			f.status = down(func(action string, elapsed time.Duration) bool {
				return action != "extend" && elapsed < 2500*time.Millisecond
			})
			w := quietWorker(NewClient(f.URL), "default")
			w.NoBatchAck = !batched
			w.Register("ok", func(context.Context, *Job) error { return nil })
			w.Register("bad", func(context.Context, *Job) error { return errors.New("bad") })
			runFor(t, w, 8*time.Second, "the ack and the failure", func() bool { return f.count("ack")+f.count("fail") == 2 })
			if w.Processed() != 1 || w.Failed() != 1 {
				t.Fatalf("processed %d failed %d", w.Processed(), w.Failed())
			}
		})
	}
}

// Stopping, a worker tries to settle only for as long as the grace lasts.
func TestWorkerSettleRetriesEndWithTheGrace(t *testing.T) {
	f := newFakeServer(t, fakeJob("ok", "ok", 60))
	f.status = down(func(action string, _ time.Duration) bool { return action == "ack" })
	w := quietWorker(NewClient(f.URL), "default")
	w.ShutdownGrace = time.Second
	w.Register("ok", func(context.Context, *Job) error { return nil })
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 5*time.Second, "the ack to be refused", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.refused["ack"] > 0
	})
	w.Stop()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the settle retries held the shutdown past its grace")
	}
}

// A failed extension is tried again well before the next regular one.
func TestWorkerRetriesAFailedExtensionSoon(t *testing.T) {
	f := newFakeServer(t, fakeJob("long", "long", 2)) // extended every 2/3 s
	tries := 0
	f.status = down(func(action string, _ time.Duration) bool {
		if action != "extend" {
			return false
		}
		tries++
		return tries == 1
	})
	c := NewClient(f.URL)
	c.Retries = 0
	w := quietWorker(c, "default")
	w.Register("long", func(context.Context, *Job) error { time.Sleep(1900 * time.Millisecond); return nil })
	runFor(t, w, 5*time.Second, "the ack", func() bool { return f.count("ack") == 1 })
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls["extend"]) == 0 {
		t.Fatal("the failed extension was not tried again while the job ran")
	}
	if after := f.calls["extend"][0].Sub(f.fetched); after > 1700*time.Millisecond {
		t.Fatalf("tried again %v after the fetch, at the next regular extension", after)
	}
}

// An ack or a failure answered with an error that sending again may fix (a 500, a 429) is sent
// again, as the Python worker does.
func TestWorkerSettlesThroughAnErrorAnswer(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusTooManyRequests} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			f := newFakeServer(t, fakeJob("ok", "ok", 60), fakeJob("bad", "bad", 60))
			f.status = func(action string, _ time.Duration, _ []byte) int {
				if action != "extend" && f.refused[action] == 0 { // called with f.mu held
					return status
				}
				return http.StatusOK
			}
			w := quietWorker(NewClient(f.URL), "default")
			w.Register("ok", func(context.Context, *Job) error { return nil })
			w.Register("bad", func(context.Context, *Job) error { return errors.New("bad") })
			runFor(t, w, 5*time.Second, "the ack and the failure", func() bool { return f.count("ack")+f.count("fail") == 2 })
			if w.Processed() != 1 || w.Failed() != 1 {
				t.Fatalf("processed %d failed %d", w.Processed(), w.Failed())
			}
		})
	}
}

// What sending again cannot change (the lease gone, the job gone, a report too large) is not sent again.
func TestWorkerDoesNotSendAgainWhatCannotChange(t *testing.T) {
	for _, status := range []int{http.StatusConflict, http.StatusNotFound, http.StatusRequestEntityTooLarge} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			f := newFakeServer(t, fakeJob("bad", "bad", 60))
			f.status = func(action string, _ time.Duration, _ []byte) int {
				if action == "fail" {
					return status
				}
				return http.StatusOK
			}
			w := quietWorker(NewClient(f.URL), "default")
			w.Register("bad", func(context.Context, *Job) error { return errors.New("bad") })
			runFor(t, w, 5*time.Second, "the failure to be given up", func() bool {
				f.mu.Lock()
				refused := f.refused["fail"]
				f.mu.Unlock()
				w.mu.Lock()
				defer w.mu.Unlock()
				return refused > 0 && len(w.running) == 0
			})
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.refused["fail"] != 1 {
				t.Fatalf("sent %d times", f.refused["fail"])
			}
		})
	}
}

// A failure the server refuses all the same is sent again without its details.
func TestWorkerSendsARefusedFailureWithoutDetails(t *testing.T) {
	f := newFakeServer(t, fakeJob("bad", "bad", 60))
	f.status = func(action string, _ time.Duration, body []byte) int {
		if action == "fail" && strings.Contains(string(body), "the details") {
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	}
	w := quietWorker(NewClient(f.URL), "default")
	w.Register("bad", func(context.Context, *Job) error { return errors.New("the details") })
	runFor(t, w, 5*time.Second, "the failure", func() bool { return f.count("fail") == 1 })
	f.mu.Lock()
	defer f.mu.Unlock()
	if body := f.bodies["fail"][0]; !strings.Contains(body, refusedMessage) || strings.Contains(body, "the details") {
		t.Fatalf("sent again as %s", body)
	}
}
