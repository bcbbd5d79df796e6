package werk

// What the worker reports: failures (errtype, backtrace, retry_in), jobs given up at shutdown,
// and its heartbeat, as the Python worker reports them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A job still running when the grace period ends is failed as WorkerShutdown with retry_in 0,
// so another worker takes it at once instead of after the backoff; ShutdownRetryIn sets the delay.
func TestJobsLeftAtShutdownRetryAtOnceOrAfterShutdownRetryIn(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	for _, delay := range []time.Duration{0, 90 * time.Second} {
		queue := uniqueQueue("go-down")
		pushed, _ := c.Push(ctx, JobSpec{JobType: "sleep", Queue: queue})
		w := quietWorker(c, queue)
		w.ShutdownGrace = 300 * time.Millisecond
		w.ShutdownRetryIn = delay
		var started int32
		w.Register("sleep", func(ctx context.Context, job *Job) error {
			atomic.StoreInt32(&started, 1)
			<-ctx.Done()
			return ctx.Err()
		})
		done := make(chan error)
		go func() { done <- w.Run(context.Background()) }()
		eventually(t, 15*time.Second, "the job to start", func() bool { return atomic.LoadInt32(&started) == 1 })
		w.Stop()
		<-done
		job, err := c.Get(ctx, pushed.JID)
		if err != nil || job.Failure == nil || job.Failure.ErrType != "WorkerShutdown" || job.Failure.NextAt == nil {
			t.Fatalf("retry in %v: %v %+v", delay, err, job)
		}
		if wait := job.Failure.NextAt.Sub(job.Failure.FailedAt); wait < delay || wait > delay+time.Second {
			t.Fatalf("retry in %v: next attempt %v after the failure", delay, wait)
		}
		if w.Failed() != 1 {
			t.Fatalf("failed %d", w.Failed())
		}
	}
}

// RetryIn keeps fractions of a second.
func TestRetryInSendsFractionalSeconds(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-frac")
	pushed, _ := c.Push(ctx, JobSpec{JobType: "later", Queue: queue})
	w := quietWorker(c, queue)
	w.Register("later", func(ctx context.Context, job *Job) error {
		return RetryIn(2500*time.Millisecond, errors.New("busy"))
	})
	runWorker(t, w, func() bool { return failureOf(c, pushed.JID) != nil })
	f := failureOf(c, pushed.JID)
	if wait := f.NextAt.Sub(f.FailedAt); wait < 2400*time.Millisecond || wait > 2600*time.Millisecond {
		t.Fatalf("next attempt %v after the failure, want 2.5s", wait)
	}
	if report, _ := steered(RetryIn(1500*time.Millisecond, nil), 30); report.RetryIn == nil || *report.RetryIn != 1.5 {
		t.Fatalf("retry_in %v", report.RetryIn)
	}
	if report, _ := steered(RetryIn(-time.Second, nil), 30); report.RetryIn == nil || *report.RetryIn != 0 {
		t.Fatalf("a negative delay: retry_in %v", report.RetryIn)
	}
}

// stackError formats as errors that record where they were made do (github.com/pkg/errors):
// %+v adds its frames to the message.
type stackError struct{ msg string }

func (e stackError) Error() string { return e.msg }
func (e stackError) Format(s fmt.State, verb rune) {
	if verb == 'v' && s.Flag('+') {
		fmt.Fprintf(s, "%s\nmain.load\n\t/src/load.go:12\nmain.run\n\t/src/run.go:40", e.msg)
		return
	}
	_, _ = io.WriteString(s, e.msg)
}

func panicky(depth int) {
	if depth == 0 {
		panic("deep")
	}
	panicky(depth - 1)
}

// Failures send backtrace lines as the Python worker does: up to the worker's limit
// (BacktraceLines), or the job's backtrace when that is smaller. A returned error sends its
// chain, or its %+v when that holds more; a panic the frames where it panicked.
func TestFailuresSendBacktracesWithinTheJobsLimit(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-bt")
	w := quietWorker(c, queue)
	w.BacktraceLines = 8
	w.Register("wrapped", func(ctx context.Context, job *Job) error {
		return fmt.Errorf("loading the invoice: %w", fmt.Errorf("reading row 3: %w", io.ErrUnexpectedEOF))
	})
	w.Register("stack", func(ctx context.Context, job *Job) error { return fmt.Errorf("run: %w", stackError{"disk full"}) })
	w.Register("panic", func(ctx context.Context, job *Job) error { panicky(10); return nil })
	w.Register("later", func(ctx context.Context, job *Job) error {
		return RetryIn(time.Hour, fmt.Errorf("limited: %w", declined{}))
	})
	push := func(jobtype string, backtrace int) string {
		job, err := c.Push(ctx, JobSpec{JobType: jobtype, Queue: queue, Backtrace: backtrace})
		if err != nil {
			t.Fatal(err)
		}
		return job.JID
	}
	wrapped, wrappedOne := push("wrapped", 0), push("wrapped", 1)
	stack, stackTwo := push("stack", 0), push("stack", 2)
	panicked, panickedThree, panickedMany := push("panic", 0), push("panic", 3), push("panic", 500)
	later := push("later", 0)
	all := []string{wrapped, wrappedOne, stack, stackTwo, panicked, panickedThree, panickedMany, later}
	runWorker(t, w, func() bool {
		for _, jid := range all {
			if failureOf(c, jid) == nil {
				return false
			}
		}
		return true
	})
	lines := func(jid string) []string { return failureOf(c, jid).Backtrace }
	chain := []string{
		"fmt.wrapError: loading the invoice: reading row 3: unexpected EOF",
		"fmt.wrapError: reading row 3: unexpected EOF",
		"errors.errorString: unexpected EOF",
	}
	if got := lines(wrapped); strings.Join(got, "|") != strings.Join(chain, "|") {
		t.Errorf("wrapped: %q", got)
	}
	if got := lines(wrappedOne); strings.Join(got, "|") != chain[0] {
		t.Errorf("wrapped, backtrace 1: %q", got)
	}
	withStack := []string{"fmt.wrapError: run: disk full", "disk full", "main.load", "\t/src/load.go:12", "main.run", "\t/src/run.go:40"}
	if got := lines(stack); strings.Join(got, "|") != strings.Join(withStack, "|") {
		t.Errorf("stack: %q", got)
	}
	if got := lines(stackTwo); strings.Join(got, "|") != strings.Join(withStack[:2], "|") {
		t.Errorf("stack, backtrace 2: %q", got)
	}
	// The panic's frames start where it panicked: the worker's recovery is left out.
	for jid, want := range map[string]int{panicked: 8, panickedThree: 3, panickedMany: 8} {
		got := lines(jid)
		if len(got) != want || !strings.HasSuffix(got[0], ".panicky") || !strings.Contains(got[1], "failures_test.go:") {
			t.Errorf("panic, %d lines wanted: %q", want, got)
		}
	}
	f := failureOf(c, later)
	if f.ErrType != "PaymentDeclined" || len(f.Backtrace) != 2 || f.Backtrace[0] != "fmt.wrapError: limited: card 4242 declined" ||
		f.Backtrace[1] != "werk.declined: card 4242 declined" {
		t.Errorf("RetryIn's cause: %+v", f)
	}
}

func TestBacktraceLinesNegativeSendsNoneAndTimeoutsSendNone(t *testing.T) {
	if report := describe(errors.New("x"), -1); len(report.Backtrace) != 0 {
		t.Errorf("no lines asked: %q", report.Backtrace)
	}
	if report := describe(&timeoutError{after: time.Second}, 30); report.ErrType != TimeoutErrType || len(report.Backtrace) != 0 {
		t.Errorf("timeout: %+v", report)
	}
	long := strings.Repeat("é", 3000)
	if report := describe(errors.New(long+"\x00"), 30); len(report.Backtrace) != 1 || len(report.Backtrace[0]) > 2000 ||
		!strings.HasPrefix(long, strings.TrimPrefix(report.Backtrace[0], "errors.errorString: ")) {
		t.Errorf("a long line: %q", report.Backtrace)
	}
}

// The heartbeat carries the process's resident memory (KiB), which the dashboard shows.
func TestWorkerBeatsCarryRSS(t *testing.T) {
	c := testClient(t)
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		t.Skip("no /proc/self/statm: the beat sends no rss_kb here")
	}
	w := quietWorker(c, uniqueQueue("go-rss"))
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	defer func() { w.Stop(); <-done }()
	var rss int
	eventually(t, 10*time.Second, "the worker's beat", func() bool {
		var list struct {
			Workers []struct {
				WID   string `json:"wid"`
				RSSKB *int   `json:"rss_kb"`
			} `json:"workers"`
		}
		if err := c.call(context.Background(), http.MethodGet, "/v1/workers", nil, &list, 0); err != nil {
			t.Fatal(err)
		}
		for _, worker := range list.Workers {
			if worker.WID == w.WID && worker.RSSKB != nil {
				rss = *worker.RSSKB
				return true
			}
		}
		return false
	})
	if own := rssKB(); rss < 1024 || rss > 4*own {
		t.Fatalf("rss_kb %d (now %d)", rss, own)
	}
}
