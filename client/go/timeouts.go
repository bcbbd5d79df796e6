package werk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"time"
)

// Per-job execution timeouts: how long one attempt's handler may run on a worker, separate from
// the server's reserve_for (how long a lease lasts between extensions, which the worker keeps
// extending). At the timeout the handler's ctx is cancelled; after the worker's TimeoutGrace the
// attempt is failed with errtype "Timeout" whether the handler returned or not, and its slot
// serves the next job. A timeout comes from Register(..., werk.WithTimeout(d)) or, per job, from
// custom.timeout (seconds), which wins. One the job's reservation cannot cover is refused where
// it is set: a lease that ran out before the handler is even asked to stop would hand the job to
// another worker while this one still runs it.

// TimeoutErrType is the errtype of an attempt failed for running past its timeout.
const TimeoutErrType = "Timeout"

const (
	reserveForDefault = 1800  // the server's default reservation (seconds)
	reserveForMax     = 86400 // the longest reservation the server accepts
)

// checkTimeout returns the timeout in seconds, or an error unless it is a positive number within
// reserveFor (the server's default when 0).
func checkTimeout(timeout any, reserveFor int, where string) (float64, error) {
	if reserveFor == 0 {
		reserveFor = reserveForDefault
	}
	var seconds float64
	switch t := timeout.(type) {
	case float64:
		seconds = t
	case float32:
		seconds = float64(t)
	case int:
		seconds = float64(t)
	case int64:
		seconds = float64(t)
	case time.Duration:
		seconds = t.Seconds()
	default:
		return 0, fmt.Errorf("werk: %s: timeout must be a positive number of seconds, not %v", where, timeout)
	}
	if math.IsNaN(seconds) || math.IsInf(seconds, 0) || seconds <= 0 {
		return 0, fmt.Errorf("werk: %s: timeout must be a positive number of seconds, not %v", where, timeout)
	}
	if seconds > float64(reserveFor) {
		return 0, fmt.Errorf("werk: %s: timeout %gs is longer than the job's reserve_for (%ds), which must cover it; "+
			"raise reserve_for or lower the timeout", where, seconds, reserveFor)
	}
	return seconds, nil
}

// checkSpecs refuses jobs whose custom.timeout their reservation cannot cover.
func checkSpecs(specs ...JobSpec) error {
	for _, spec := range specs {
		if timeout, ok := spec.Custom["timeout"]; ok && timeout != nil {
			if _, err := checkTimeout(timeout, spec.ReserveFor, fmt.Sprintf("job %q", spec.JobType)); err != nil {
				return err
			}
		}
	}
	return nil
}

// HandlerOption configures a handler at Register.
type HandlerOption func(*registered)

type registered struct {
	handler Handler
	timeout time.Duration
}

// WithTimeout limits how long one attempt of the handler may run (a job's custom.timeout
// overrides it). Register panics on a timeout no reservation can cover.
func WithTimeout(d time.Duration) HandlerOption {
	return func(r *registered) { r.timeout = d }
}

// timeoutError is what a timed-out attempt is failed with.
type timeoutError struct{ after time.Duration }

func (e *timeoutError) Error() string {
	return fmt.Sprintf("the handler ran past its timeout of %gs", e.after.Seconds())
}
func (e *timeoutError) ErrType() string { return TimeoutErrType }

// runWithin runs the handler under a context cancelled at timeout; past timeout+grace the attempt
// is a Timeout failure even if the handler never returns (it runs on, without its slot).
func runWithin(ctx context.Context, h Handler, job *Job, timeout, grace time.Duration) error {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		returned := false
		defer func() {
			if !returned { // runtime.Goexit: nothing came back
				done <- errExited
			}
		}()
		err := runHandler(hctx, h, job)
		returned = true
		done <- err
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	cancel()
	select {
	case <-done:
	case <-time.After(grace):
	}
	return &timeoutError{after: timeout}
}

// RetryInError asks for the attempt to be retried after Delay (sent in seconds, fractions kept)
// instead of the backoff schedule.
type RetryInError struct {
	Delay   time.Duration
	Err     error  // what went wrong (its type and message are recorded); may be nil
	Type    string // errtype to record instead of Err's type
	Message string
}

func (e *RetryInError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("retry in %gs", e.Delay.Seconds())
}
func (e *RetryInError) Unwrap() error { return e.Err }

// NoRetryError fails the attempt without retries: the job goes to the dead set.
type NoRetryError struct {
	Err     error
	Type    string
	Message string
}

func (e *NoRetryError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	if e.Message != "" {
		return e.Message
	}
	return "not retried"
}
func (e *NoRetryError) Unwrap() error { return e.Err }

// RetryIn returns an error that, returned by a handler, retries the job after d (rate limits, a
// dependency that says "come back later"); err (may be nil) is recorded as the failure.
func RetryIn(d time.Duration, err error) error { return &RetryInError{Delay: d, Err: err} }

// NoRetry returns an error that, returned by a handler, sends the job to the dead set at once
// (retrying a job that can never succeed only burns capacity); err is recorded as the failure.
func NoRetry(err error) error { return &NoRetryError{Err: err} }

// steered turns RetryIn/NoRetry errors into their report, with at most maxLines of backtrace
// (false: err is neither).
func steered(err error, maxLines int) (FailReport, bool) {
	var retryIn *RetryInError
	var noRetry *NoRetryError
	switch {
	case errors.As(err, &retryIn):
		report := reportOf(retryIn.Err, retryIn.Type, retryIn.Error(), maxLines)
		delay := retryIn.Delay
		if delay < 0 {
			delay = 0 // taken as at once: the server refuses a negative retry_in
		}
		report.RetryIn = Seconds(delay)
		return report, true
	case errors.As(err, &noRetry):
		report := reportOf(noRetry.Err, noRetry.Type, noRetry.Error(), maxLines)
		no := false
		report.Retry = &no
		return report, true
	}
	return FailReport{}, false
}

func reportOf(cause error, errtype, message string, maxLines int) FailReport {
	report := FailReport{ErrType: errtype, Message: message}
	if cause != nil {
		described := describe(cause, maxLines)
		if report.ErrType == "" {
			report.ErrType = described.ErrType
		}
		report.Backtrace = described.Backtrace
	}
	if report.ErrType == "" {
		report.ErrType = "error"
	}
	return report
}

// weightedOrder draws queues one by one without replacement, each with probability proportional
// to its weight (default 1): key u^(1/w), largest first (Efraimidis and Spirakis), as Sidekiq
// orders weighted queues on every fetch.
func weightedOrder(queues []string, weights map[string]int) []string {
	keys := make(map[string]float64, len(queues))
	for _, q := range queues {
		w := weights[q]
		if w < 1 {
			w = 1
		}
		keys[q] = math.Pow(rand.Float64(), 1/float64(w))
	}
	out := append([]string(nil), queues...)
	sort.SliceStable(out, func(i, j int) bool { return keys[out[i]] > keys[out[j]] })
	return out
}
