package werk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Handler runs one job. Returning an error fails the attempt (it retries per the job's policy);
// the failure's errtype is the error's ErrType() string if it has that method, else its Go type.
// A panic (panic(nil) too) is recovered and reported as a failure, as are a call of
// runtime.Goexit (errtype "Goexit") and an error whose own methods panic (a nil pointer). ctx is
// cancelled when the lease is lost or the worker gives the job up at shutdown: stop work then,
// the outcome is ignored. It is also cancelled at the job's timeout (WithTimeout,
// custom.timeout): the attempt then fails with errtype "Timeout". Return RetryIn(d, err) or
// NoRetry(err) to steer the retry.
type Handler func(ctx context.Context, job *Job) error

// Middleware wraps every job's handler: func(next werk.Handler) werk.Handler { return
// func(ctx, job) error { ...; err := next(ctx, job); ...; return err } }. Returning an error fails
// the job; not calling next skips the handler (the job is acked). The first added is the outermost.
type Middleware func(next Handler) Handler

// Hook runs once when the worker starts (before it fetches; an error stops Run) or stops (after
// its jobs were settled).
type Hook func(ctx context.Context) error

// Worker fetches jobs from Queues in batches (long polling), runs their handlers with up to
// Concurrency at once, keeps their leases extended, acks or fails them, and heartbeats. The
// server's quiet stops fetching; terminate, SIGTERM/SIGINT or a cancelled Run context shut down
// gracefully: no new jobs, running jobs get ShutdownGrace, then what is left is failed with
// errtype "WorkerShutdown" and retry_in ShutdownRetryIn (0: retried at once, elsewhere: it was
// interrupted, not broken, so the backoff schedule does not apply). Set fields before Run.
type Worker struct {
	Client        *Client
	Queues        []string       // default ["default"]
	Weights       map[string]int // {"critical": 6, "default": 3}: each fetch orders Queues by a weighted draw; nil: strict order
	TimeoutGrace  time.Duration  // after a job's timeout, how long its handler may take to return, default 5 s
	Concurrency   int            // default 10
	FetchBatch    int            // most jobs per fetch, default 100
	FetchWait     float64        // long-poll seconds per fetch, default 25 (the server caps it at 30)
	BeatInterval  time.Duration  // default 15 s
	ShutdownGrace time.Duration  // default 25 s
	ExtendAt      float64        // extend each time this fraction of reserve_for has passed, default 1/3
	WID           string         // default: a new random id
	Labels        []string       // default ["go"]
	IgnoreSignals bool           // do not stop on SIGTERM/SIGINT
	NoBatchAck    bool           // ack each job in a request of its own instead of together
	Logger        *log.Logger    // default: log.Default()

	// ShutdownRetryIn: the retry delay asked for jobs failed at shutdown; default 0 (at once).
	ShutdownRetryIn time.Duration
	// BacktraceLines: most backtrace lines a failure sends, default 30; a job pushed with a
	// smaller backtrace (> 0) sends that many. Negative: none.
	BacktraceLines int

	handlers   map[string]registered
	middleware []Middleware
	startup    []Hook
	shutdown   []Hook

	mu        sync.Mutex
	state     string
	running   map[*runningJob]struct{} // fetched and not yet settled
	handling  int                      // of those, the ones whose handler has not returned
	requested int                      // jobs asked for by the fetches in flight
	fetches   int                      // fetches in flight
	wake      chan struct{}
	stopCh    chan struct{}
	stopOnce  sync.Once
	graceCut  time.Duration
	graceCh   chan struct{} // told when graceCut shrinks, so a drain under way ends sooner
	fetchStop context.CancelFunc
	active    bool // Run is under way
	stopEarly bool // Stop or Terminate came while it was not: the next Run returns at once

	processed, failed int
	acks              *ackBatcher
}

type runningJob struct {
	job     *Job
	cancel  context.CancelFunc
	mu      sync.Mutex
	settled bool // acked, failed, or given up (lease lost): nothing more is sent for it
	handled bool // its handler returned (or never ran): its slot of Concurrency is free
}

// claim marks the job settled; false if someone else already did.
func (r *runningJob) claim() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled {
		return false
	}
	r.settled = true
	return true
}

// NewWorker returns a worker with defaults, fetching from queues (default ["default"]).
func NewWorker(client *Client, queues ...string) *Worker {
	if client == nil {
		client = NewClient("")
	}
	return &Worker{Client: client, Queues: queues}
}

// Register runs h for jobs of jobtype; WithTimeout(d) limits each attempt. It panics on a
// timeout no reservation can cover, as a programming error.
func (w *Worker) Register(jobtype string, h Handler, opts ...HandlerOption) {
	r := registered{handler: h}
	for _, opt := range opts {
		opt(&r)
	}
	if r.timeout != 0 {
		if _, err := checkTimeout(r.timeout, reserveForMax, fmt.Sprintf("handler %q", jobtype)); err != nil {
			panic(err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.handlers == nil {
		w.handlers = map[string]registered{}
	}
	w.handlers[jobtype] = r
}

// Use adds middleware around every job (after the middleware already added).
func (w *Worker) Use(mw ...Middleware) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.middleware = append(w.middleware, mw...)
}

// OnStartup runs hook once when the worker starts, before it fetches.
func (w *Worker) OnStartup(hook Hook) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.startup = append(w.startup, hook)
}

// OnShutdown runs hook once when the worker stops, after its jobs were settled.
func (w *Worker) OnShutdown(hook Hook) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shutdown = append(w.shutdown, hook)
}

// Processed and Failed count the jobs this worker acked and failed.
func (w *Worker) Processed() int { w.mu.Lock(); defer w.mu.Unlock(); return w.processed }

// Failed counts the jobs this worker failed.
func (w *Worker) Failed() int { w.mu.Lock(); defer w.mu.Unlock(); return w.failed }

// State is running, quiet or terminate.
func (w *Worker) State() string { w.mu.Lock(); defer w.mu.Unlock(); return w.state }

// Quiet stops fetching; running jobs finish.
func (w *Worker) Quiet() {
	w.mu.Lock()
	if w.state == StateRunning {
		w.state = StateQuiet
	}
	stop := w.fetchStop
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	w.poke()
}

// Stop shuts down gracefully (running jobs get ShutdownGrace); Run returns when done. Called
// while Run is not under way (before it, as when Run was started in a goroutine that has not
// got there yet), it makes the next Run return nil at once, without starting: no hooks, no
// requests.
func (w *Worker) Stop() { w.stopWithGrace(-1, true) }

// Terminate shuts down now: running jobs are failed at once (they retry). Called while Run is
// not under way, it makes the next Run return at once, as Stop does.
func (w *Worker) Terminate() { w.stopWithGrace(0, true) }

// stopWithGrace stops the run under way; early: when none is, the next Run returns at once (the
// caller's Stop or Terminate), otherwise nothing is done (Run's own goroutines, which may call
// it as Run returns).
func (w *Worker) stopWithGrace(grace time.Duration, early bool) {
	w.mu.Lock()
	if !w.active {
		// Run has not made its channels: it will find this instead.
		w.stopEarly = w.stopEarly || early
		w.mu.Unlock()
		return
	}
	if grace >= 0 && (w.graceCut < 0 || grace < w.graceCut) {
		w.graceCut = grace
		select {
		case w.graceCh <- struct{}{}:
		default:
		}
	}
	w.state = StateTerminate
	stop := w.fetchStop
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	w.stopOnce.Do(func() { close(w.stopCh) })
	w.poke()
}

func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) defaults() {
	if len(w.Queues) == 0 {
		w.Queues = []string{"default"}
	}
	if w.TimeoutGrace <= 0 {
		w.TimeoutGrace = 5 * time.Second
	}
	if w.Concurrency <= 0 {
		w.Concurrency = 10
	}
	if w.FetchBatch <= 0 || w.FetchBatch > 100 {
		w.FetchBatch = 100
	}
	if w.FetchWait == 0 {
		w.FetchWait = 25
	}
	if w.BeatInterval <= 0 {
		w.BeatInterval = 15 * time.Second
	}
	if w.ShutdownGrace <= 0 {
		w.ShutdownGrace = 25 * time.Second
	}
	if w.ShutdownRetryIn < 0 {
		w.ShutdownRetryIn = 0
	}
	if w.BacktraceLines == 0 {
		w.BacktraceLines = 30
	}
	if w.ExtendAt <= 0 || w.ExtendAt >= 1 {
		// As the Python worker: a failed extension leaves two thirds of the lease to try again.
		w.ExtendAt = 1.0 / 3
	}
	if w.WID == "" {
		w.WID = NewJID()
	}
	if len(w.Labels) == 0 {
		w.Labels = []string{"go"}
	}
	if w.Logger == nil {
		w.Logger = log.Default()
	}
}

// Run works until ctx is cancelled, Stop/Terminate is called, the server says terminate, or a
// SIGTERM/SIGINT arrives (a second signal, or Terminate, cuts the grace period, even one under
// way). Every fetched job has been acked or failed (or was found taken away) when it returns.
func (w *Worker) Run(ctx context.Context) error {
	w.defaults()
	for q, weight := range w.Weights {
		if weight < 1 || !contains(w.Queues, q) {
			return fmt.Errorf("werk: weights must name queues of Queues, each >= 1 (%s: %d)", q, weight)
		}
	}
	// The channels Stop and Terminate use are made before the startup hooks run: a stop
	// during them is not lost.
	w.mu.Lock()
	if w.stopEarly {
		w.stopEarly = false
		w.mu.Unlock()
		return nil
	}
	w.active = true
	before := w.state
	w.state = StateRunning
	w.running = map[*runningJob]struct{}{}
	w.handling, w.requested, w.fetches = 0, 0, 0
	w.wake = make(chan struct{}, 1)
	w.stopCh = make(chan struct{})
	w.stopOnce = sync.Once{}
	w.graceCut = -1
	w.graceCh = make(chan struct{}, 1)
	w.acks = nil
	if !w.NoBatchAck {
		w.acks = &ackBatcher{client: w.Client}
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.active = false
		w.mu.Unlock()
	}()
	for _, hook := range w.startup {
		if err := hook(ctx); err != nil {
			w.mu.Lock()
			w.state = before // it never ran
			w.mu.Unlock()
			return err
		}
	}
	defer func() {
		for _, hook := range w.shutdown {
			if err := hook(context.Background()); err != nil {
				w.Logger.Printf("werk worker %s: shutdown hook: %v", w.WID, err)
			}
		}
	}()

	if !w.IgnoreSignals {
		signals := make(chan os.Signal, 2)
		signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(signals)
		// Signals are read until Run returns, not until the worker stops: the second one must
		// reach the drain, which the first started.
		ran := make(chan struct{})
		defer close(ran)
		go func() {
			for count := 1; ; count++ {
				select {
				case <-signals:
				case <-ran:
					return
				}
				if count == 1 {
					w.stopWithGrace(-1, false)
				} else {
					w.stopWithGrace(0, false)
					return
				}
			}
		}()
	}
	go func() {
		select {
		case <-ctx.Done():
			w.stopWithGrace(-1, false)
		case <-w.stopCh:
		}
	}()

	// Jobs run under jobsCtx, cancelled when the grace period is over.
	jobsCtx, cancelJobs := context.WithCancel(context.Background())
	defer cancelJobs()
	var jobs sync.WaitGroup
	beatDone := make(chan struct{})
	go func() { defer close(beatDone); w.beatLoop() }()

	w.fetchLoop(jobsCtx, &jobs)

	// Drain: wait for running jobs up to the grace period, then give up the rest.
	done := make(chan struct{})
	go func() { jobs.Wait(); close(done) }()
	if !w.drained(done, time.Now()) {
		// Take what is left before cancelling it: a cancelled handler leaves its job to Run and
		// drops out of w.running, so a list taken after the cancellation could miss it (the job
		// would then stay leased until its reservation expired).
		w.mu.Lock()
		left := make([]*runningJob, 0, len(w.running))
		for r := range w.running {
			if r.claim() {
				left = append(left, r)
			}
		}
		w.mu.Unlock()
		cancelJobs()
		var giveUp sync.WaitGroup
		for _, r := range left {
			giveUp.Add(1)
			go func(r *runningJob) {
				defer giveUp.Done()
				w.fail(context.Background(), r, FailReport{ErrType: ShutdownErrType,
					Message: fmt.Sprintf("worker %s shut down before the job finished", w.WID),
					RetryIn: Seconds(w.ShutdownRetryIn)})
			}(r)
		}
		giveUp.Wait()
	}
	<-beatDone
	return nil
}

// drained waits for done until the grace period, counted from start, is over: false when it
// ended first. A grace cut meanwhile (Terminate, a second signal) counts at once.
func (w *Worker) drained(done <-chan struct{}, start time.Time) bool {
	for {
		w.mu.Lock()
		grace := w.ShutdownGrace
		if w.graceCut >= 0 && w.graceCut < grace {
			grace = w.graceCut
		}
		w.mu.Unlock()
		timer := time.NewTimer(time.Until(start.Add(grace)))
		select {
		case <-done:
			timer.Stop()
			return true
		case <-timer.C:
			return false
		case <-w.graceCh:
			timer.Stop()
		}
	}
}

func (w *Worker) stopping() bool {
	select {
	case <-w.stopCh:
		return true
	default:
		return false
	}
}

// fetchLoop keeps fetches in flight for the capacity the running jobs leave free, until the
// worker stops. A handler's slot frees when it returns, before its ack is confirmed: the ack goes
// out with others (ackBatcher), and fetching only once it is confirmed would leave the worker
// idle for an ack's round trip after every batch. Jobs awaiting their ack are bounded too (at
// most Concurrency of them besides the running handlers). A second fetch pipelines behind the
// first, so a job pushed while one fetch's answer travels back, and while it is asked again,
// finds the other one long-polling at the server.
func (w *Worker) fetchLoop(jobsCtx context.Context, jobs *sync.WaitGroup) {
	fetchCtx, cancelFetches := context.WithCancel(context.Background())
	defer cancelFetches()
	w.mu.Lock()
	w.fetchStop = cancelFetches
	stateNow := w.state
	w.mu.Unlock()
	if stateNow != StateRunning {
		cancelFetches() // quieted before Run got here
	}
	maxFetches := (w.Concurrency + w.FetchBatch - 1) / w.FetchBatch
	if maxFetches < 2 {
		maxFetches = 2
	}
	// With a fetch already in flight, the next one waits for half a batch of free capacity:
	// handlers that end one by one would otherwise each send a fetch for one or two jobs.
	floor := min(w.FetchBatch, w.Concurrency) / 2
	if floor < 1 {
		floor = 1
	}
	var inFlight sync.WaitGroup
	failures := 0
	// The handlers of one fetch end together but one goroutine at a time: with a fetch still in
	// flight there is no hurry, so the loop gives the others a moment to end and asks for their
	// slots too, instead of for half a batch.
	var gatherUntil time.Time
	gather := time.NewTimer(time.Hour)
	gather.Stop()
	defer gather.Stop()
	for !w.stopping() {
		w.mu.Lock()
		free := min(w.Concurrency-w.handling, 2*w.Concurrency-len(w.running)) - w.requested
		need := 1
		if w.fetches > 0 {
			need = floor
		}
		if w.state != StateRunning || free < need || w.fetches >= maxFetches {
			w.mu.Unlock()
			select {
			case <-w.wake:
			case <-w.stopCh:
			}
			continue
		}
		if w.fetches > 0 && free < w.FetchBatch {
			now := time.Now()
			if gatherUntil.IsZero() {
				gatherUntil = now.Add(fetchGather)
			}
			if now.Before(gatherUntil) {
				w.mu.Unlock()
				gather.Reset(gatherUntil.Sub(now))
				select {
				case <-w.wake:
				case <-gather.C:
				case <-w.stopCh:
				}
				if !gather.Stop() {
					select {
					case <-gather.C:
					default:
					}
				}
				continue
			}
		}
		gatherUntil = time.Time{}
		count := min(free, w.FetchBatch)
		w.requested += count
		w.fetches++
		w.mu.Unlock()
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			fetched, err := w.Client.Fetch(fetchCtx, FetchRequest{Queues: w.queueOrder(), WID: w.WID, Count: count, Wait: w.FetchWait})
			if err != nil && fetchCtx.Err() == nil {
				w.mu.Lock()
				failures++
				backoff := time.Duration(250*(1<<min(failures, 5))) * time.Millisecond
				w.mu.Unlock()
				w.Logger.Printf("werk worker %s: fetch failed: %v", w.WID, err)
				// The capacity stays asked for while backing off, so no other fetch hammers a
				// server that is down.
				select {
				case <-time.After(backoff):
				case <-w.stopCh:
				}
			} else if err == nil {
				w.mu.Lock()
				failures = 0
				w.mu.Unlock()
			}
			// Jobs fetched are ours to run even when the worker is stopping meanwhile. The fetch
			// loop is woken before the handlers are started: the goroutine readied last runs
			// next on this thread, and that should be a job's handler, not the next fetch.
			w.mu.Lock()
			w.requested -= count
			w.fetches--
			w.poke()
			for i := range fetched {
				w.startLocked(jobsCtx, jobs, &fetched[i])
			}
			w.mu.Unlock()
		}()
	}
	cancelFetches()
	inFlight.Wait()
}

// How long the fetch loop waits at most for a full batch of free capacity while a fetch is in flight.
const fetchGather = time.Millisecond

// startLocked runs job in a goroutine of its own (w.mu held).
func (w *Worker) startLocked(jobsCtx context.Context, jobs *sync.WaitGroup, job *Job) {
	jobCtx, cancelJob := context.WithCancel(jobsCtx)
	r := &runningJob{job: job, cancel: cancelJob}
	// Keyed by attempt, not jid: a job killed and retried meanwhile may come back to this worker
	// while its old attempt still runs, and the old attempt's end must not drop the new one.
	w.running[r] = struct{}{}
	w.handling++
	jobs.Add(1)
	go func() {
		defer jobs.Done()
		defer func() {
			cancelJob()
			w.mu.Lock()
			delete(w.running, r)
			w.handledLocked(r)
			w.mu.Unlock()
			w.poke()
		}()
		w.execute(jobCtx, r)
	}()
}

// handled frees r's handler slot (once), so the fetch loop may ask for more while its ack is on
// its way.
func (w *Worker) handled(r *runningJob) {
	w.mu.Lock()
	freed := w.handledLocked(r)
	w.mu.Unlock()
	if freed {
		w.poke()
	}
}

func (w *Worker) handledLocked(r *runningJob) bool {
	if r.handled {
		return false
	}
	r.handled = true
	w.handling--
	return true
}

func (w *Worker) queueOrder() []string {
	if len(w.Weights) == 0 {
		return w.Queues
	}
	return weightedOrder(w.Queues, w.Weights)
}

func contains(list []string, s string) bool {
	for _, item := range list {
		if item == s {
			return true
		}
	}
	return false
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func (w *Worker) beatLoop() {
	host, _ := os.Hostname()
	for {
		state, err := w.Client.Beat(context.Background(), Beat{
			WID: w.WID, Hostname: host, PID: os.Getpid(), Labels: w.Labels, CurrentState: w.State(),
			RSSKB: rssKB(),
		})
		if err != nil {
			w.Logger.Printf("werk worker %s: beat failed: %v", w.WID, err)
		} else if state == StateQuiet && w.State() == StateRunning {
			w.Quiet()
		} else if state == StateTerminate {
			w.stopWithGrace(-1, false)
		}
		select {
		case <-w.stopCh:
			return
		case <-time.After(w.BeatInterval):
		}
	}
}

// rssKB is the process's resident set size in KiB, as the dashboard shows it; 0 (not sent)
// where /proc/self/statm does not tell it (outside Linux).
func rssKB() int {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.Atoi(fields[1])
	if err != nil {
		return 0
	}
	return pages * (os.Getpagesize() / 1024)
}

type checkpointKey struct{}

// Checkpoint extends the lease of the job running under ctx and records progress, which the
// next attempt receives as job.Progress.
func Checkpoint(ctx context.Context, progress any) error {
	f, ok := ctx.Value(checkpointKey{}).(func(any) error)
	if !ok {
		return errors.New("werk: Checkpoint called outside a job handler")
	}
	return f(progress)
}

// execute runs r's handler and settles the job. A handler that calls runtime.Goexit never
// returns, and its goroutine ends after the deferred calls: the job is failed on the way out
// rather than left leased until its reservation expires.
func (w *Worker) execute(ctx context.Context, r *runningJob) {
	over := false
	defer func() {
		if !over && ctx.Err() == nil {
			w.settleFailure(ctx, r, exitReport)
		}
	}()
	w.run(ctx, r)
	over = true
}

// What a job whose handler called runtime.Goexit instead of returning is failed with; errExited
// stands for it where an error is passed on (runWithin).
var (
	exitReport = FailReport{ErrType: "Goexit", Message: "the handler called runtime.Goexit instead of returning"}
	errExited  = errors.New(exitReport.Message)
)

func (w *Worker) run(ctx context.Context, r *runningJob) {
	w.mu.Lock()
	reg, ok := w.handlers[r.job.JobType]
	middleware := w.middleware
	w.mu.Unlock()
	if !ok {
		w.settleFailure(ctx, r, FailReport{ErrType: "UnknownJobType",
			Message: fmt.Sprintf("no handler registered for jobtype %q on this worker", r.job.JobType)})
		return
	}
	extend := func(opts ExtendOptions) error {
		opts.ReserveFor = r.job.ReserveFor
		_, err := w.Client.Extend(context.Background(), r.job.JID, r.job.LeaseToken(), opts)
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrJobNotFound) {
			r.claim() // not ours any more: report nothing for it
			r.cancel()
		}
		return err
	}
	ctx = context.WithValue(ctx, checkpointKey{}, func(progress any) error {
		return extend(ExtendOptions{Progress: progress})
	})
	every := time.Duration(float64(r.job.ReserveFor) * w.ExtendAt * float64(time.Second))
	if every < extendMin {
		every = extendMin
	}
	// A failed extension is tried again well before the lease runs out, as the Python worker
	// does, instead of at the next regular extension.
	retryEvery := every / 2
	if retryEvery > 5*time.Second {
		retryEvery = 5 * time.Second
	}
	// A timer rather than a goroutine per job: most jobs end long before their first extension.
	var extendMu sync.Mutex
	var extender *time.Timer
	finished := false
	tick := func() {
		next := every
		if err := extend(ExtendOptions{}); errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrJobNotFound) {
			return // not ours any more
		} else if err != nil {
			w.Logger.Printf("werk worker %s: extending job %s: %v", w.WID, r.job.JID, err)
			next = retryEvery
		}
		extendMu.Lock()
		defer extendMu.Unlock()
		if !finished {
			extender.Reset(next)
		}
	}
	extendMu.Lock()
	extender = time.AfterFunc(every, tick)
	extendMu.Unlock()
	defer func() {
		extendMu.Lock()
		finished = true
		extender.Stop()
		extendMu.Unlock()
	}()

	handler := reg.handler
	for i := len(middleware) - 1; i >= 0; i-- {
		handler = middleware[i](handler)
	}
	timeout := reg.timeout
	if custom, set := r.job.Custom["timeout"]; set && custom != nil {
		seconds, err := checkTimeout(custom, r.job.ReserveFor, "job "+r.job.JID)
		if err != nil { // pushed around the SDK's check: it can never run within its reservation
			no := false
			w.settleFailure(ctx, r, FailReport{ErrType: "InvalidTimeout", Message: err.Error(), Retry: &no})
			return
		}
		timeout = time.Duration(seconds * float64(time.Second))
		if timeout <= 0 {
			timeout = 1 // under a nanosecond is still a limit, not none
		}
	}
	// Read here, under the lease extension above: a job with many dependencies may take a few
	// pages. The handler's timeout is its own and does not count the reading.
	if err := w.fillOmitted(ctx, r.job); err != nil {
		w.handled(r)
		if ctx.Err() != nil {
			return // lease lost, or given up at shutdown (already failed by Run)
		}
		// As if the handler had returned it: the job runs again later.
		w.settleFailure(ctx, r, describe(err, w.backtraceLines(r.job)))
		return
	}
	var err error
	if timeout > 0 {
		err = runWithin(ctx, handler, r.job, timeout, w.TimeoutGrace)
	} else {
		err = runHandler(ctx, handler, r.job)
	}
	w.handled(r)
	if ctx.Err() != nil {
		return // lease lost, or given up at shutdown (already failed by Run)
	}
	if err != nil {
		w.settleFailure(ctx, r, describe(err, w.backtraceLines(r.job)))
		return
	}
	if !r.claim() {
		return
	}
	var acked bool
	if err := w.persist(ctx, func() (err error) { acked, err = w.ack(r.job); return err }); err != nil {
		w.reportSettle(r, err)
		return
	} else if !acked {
		return // the lease was no longer ours: the job is someone else's now
	}
	w.mu.Lock()
	w.processed++
	w.mu.Unlock()
}

// fillOmitted gives job what its fetch answer left out of its dependencies, read from the job's
// dependency pages, so a handler sees every dependency and result as the job was pushed to get
// them: the results left out (ResultOmitted), and the dependencies not listed
// (DependenciesOmitted). Reading starts at the page holding the first result left out, or else
// the first dependency not listed (the cursor is exclusive: the dependency before it, in the
// answer's order, which is the server's), and ends once nothing is missing.
func (w *Worker) fillOmitted(ctx context.Context, job *Job) error {
	var omitted map[string]int // jid: index in job.Dependencies
	cursor := ""
	for i, d := range job.Dependencies {
		if !d.ResultOmitted {
			continue
		}
		if omitted == nil {
			omitted = map[string]int{}
			if i > 0 {
				cursor = job.Dependencies[i-1].JID
			}
		}
		omitted[d.JID] = i
	}
	var listed map[string]bool // with DependenciesOmitted: the jids the answer listed
	if job.DependenciesOmitted {
		listed = make(map[string]bool, len(job.Dependencies))
		for _, d := range job.Dependencies {
			listed[d.JID] = true
		}
		if omitted == nil && len(job.Dependencies) > 0 {
			cursor = job.Dependencies[len(job.Dependencies)-1].JID
		}
	} else if len(omitted) == 0 {
		return nil
	}
	err := w.Client.dependencyPages(ctx, job.JID, cursor, func(page []Dependency) bool {
		for _, d := range page {
			if i, ok := omitted[d.JID]; ok {
				job.Dependencies[i].Result = d.Result
				job.Dependencies[i].ResultOmitted = false
				delete(omitted, d.JID)
			} else if listed != nil && !listed[d.JID] {
				// After every dependency listed, in jid order as they are.
				job.Dependencies = append(job.Dependencies, d)
			}
		}
		return len(omitted) > 0 || listed != nil
	})
	if err == nil && len(omitted) > 0 {
		err = fmt.Errorf("werk: job %s: %d dependencies whose results the fetch left out are not in its dependency pages",
			job.JID, len(omitted))
	}
	if err == nil {
		job.DependenciesOmitted = false
	}
	return err
}

type panicError struct {
	value  any
	frames []string // the stack where it panicked: see panicFrames
}

func (p *panicError) Error() string { return "panic: " + p.message() }

// message is the panic's value as text; panic(nil) has a text of its own, as "<nil>" says nothing.
func (p *panicError) message() string {
	if p.value == nil {
		return "panic called with nil argument"
	}
	return fmt.Sprint(p.value)
}

// runHandler runs h, a panic turned into a *panicError. Whether h returned is what tells a panic
// from a return: recover answers nil for panic(nil) (before Go 1.21) as it does with no panic.
// (For runtime.Goexit it answers nil too but stops nothing: the caller never gets the error.)
func runHandler(ctx context.Context, h Handler, job *Job) (err error) {
	returned := false
	defer func() {
		if !returned {
			err = &panicError{value: recover(), frames: panicFrames()}
		}
	}()
	err = h(ctx, job)
	returned = true
	return err
}

// panicFrames is the stack of the panic being recovered, two lines a frame (function, then file
// and line), innermost first: the frames of the job's own code (handler and middleware), from
// the one that panicked out to runHandler. The recovering frames and the runtime's panic
// machinery are the same for every job and are left out.
func panicFrames() []string {
	// Where the frames stop being the job's.
	runHandlerName := runtime.FuncForPC(reflect.ValueOf(runHandler).Pointer()).Name()
	var pcs [128]uintptr
	n := runtime.Callers(1, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	var lines []string
	inRuntime := false
	for more := true; more; {
		var f runtime.Frame
		f, more = frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			lines, inRuntime = lines[:0], true // what came before is the recovery
			continue
		case inRuntime && strings.HasPrefix(f.Function, "runtime."):
			continue // how a fault became a panic (runtime.sigpanic, runtime.panicmem)
		case f.Function == runHandlerName:
			return lines
		}
		inRuntime = false
		lines = append(lines, f.Function, "\t"+f.File+":"+strconv.Itoa(f.Line))
	}
	return lines
}

// ShutdownErrType is the errtype of a job failed because its worker stopped before it finished.
const ShutdownErrType = "WorkerShutdown"

// Most lines of a backtrace, and bytes of a line, a failure sends (the server refuses a
// failure over its own limits, and the job would then wait out its lease).
const (
	maxBacktraceLines = 1000
	maxBacktraceLine  = 2000
)

// backtraceLines is how many backtrace lines job's failures send: the job's own backtrace when it
// is set (> 0), within the worker's BacktraceLines.
func (w *Worker) backtraceLines(job *Job) int {
	if job.Backtrace > 0 && job.Backtrace < w.BacktraceLines {
		return job.Backtrace
	}
	return w.BacktraceLines
}

// describe is the failure report for what a handler returned, with at most maxLines lines of
// backtrace. A panic sends the stack where it panicked (panicFrames). A returned error's stack
// is gone by the time the handler returns, so its backtrace is what the error itself holds: its
// %+v text when that says more than Error() (errors that record where they were made, such as
// github.com/pkg/errors'), else its chain as errors.Unwrap walks it, one "type: message" line
// per error, outermost first. A timeout sends none. An error whose methods panic (a nil pointer
// returned as an error, whose Error dereferences it) is described by its type alone: the worker
// must not crash on what a handler returned.
func describe(err error, maxLines int) (report FailReport) {
	described := false
	defer func() {
		if !described {
			// A panic(nil) recovers as nil too: whether describing ended is what tells.
			v := recover()
			report = FailReport{ErrType: goType(err),
				Message: fmt.Sprintf("the handler returned a %T whose methods panicked: %v", err, (&panicError{value: v}).message())}
		}
	}()
	report = describeError(err, maxLines)
	described = true
	return report
}

// goType is the name of err's Go type, without calling any of its methods.
func goType(err error) string { return strings.TrimPrefix(fmt.Sprintf("%T", err), "*") }

func describeError(err error, maxLines int) FailReport {
	if err == errExited {
		return exitReport
	}
	if report, ok := steered(err, maxLines); ok {
		return report
	}
	if timedOut, ok := err.(*timeoutError); ok {
		return FailReport{ErrType: timedOut.ErrType(), Message: timedOut.Error()}
	}
	var p *panicError
	if errors.As(err, &p) {
		return FailReport{ErrType: "panic", Message: p.message(), Backtrace: backtrace(p.frames, maxLines)}
	}
	return FailReport{ErrType: errType(err), Message: err.Error(), Backtrace: backtrace(errorLines(err, maxLines), maxLines)}
}

// errType is the errtype of err: its ErrType() if it has that method, else its Go type.
func errType(err error) string {
	var typed interface{ ErrType() string }
	if errors.As(err, &typed) {
		return typed.ErrType()
	}
	return goType(err)
}

// errorLines is a returned error's backtrace (see describe), at most about limit lines.
func errorLines(err error, limit int) []string {
	var lines []string
	var walk func(error)
	walk = func(e error) {
		if e == nil || len(lines) >= limit {
			return
		}
		if detailed := fmt.Sprintf("%+v", e); detailed != e.Error() {
			// Such an error's %+v includes what it wraps.
			for _, line := range strings.Split(detailed, "\n") {
				if strings.TrimSpace(line) != "" {
					lines = append(lines, line)
				}
			}
			return
		}
		lines = append(lines, goType(e)+": "+e.Error())
		switch wrapper := e.(type) {
		case interface{ Unwrap() error }:
			walk(wrapper.Unwrap())
		case interface{ Unwrap() []error }: // errors.Join, fmt.Errorf with several %w
			for _, inner := range wrapper.Unwrap() {
				walk(inner)
			}
		}
	}
	walk(err)
	return lines
}

// backtrace keeps the first maxLines of lines (a panic's innermost frames, an error's outermost
// links), each within the server's limits.
func backtrace(lines []string, maxLines int) []string {
	if maxLines > maxBacktraceLines {
		maxLines = maxBacktraceLines
	}
	if maxLines <= 0 {
		return nil
	}
	if len(lines) > maxLines {
		lines = lines[:maxLines]
	}
	out := make([]string, len(lines))
	for i, line := range lines {
		line = strings.ReplaceAll(line, "\x00", "\\x00")
		if len(line) > maxBacktraceLine {
			line = strings.ToValidUTF8(line[:maxBacktraceLine], "")
		}
		out[i] = line
	}
	return out
}

func (w *Worker) settleFailure(ctx context.Context, r *runningJob, report FailReport) {
	if r.claim() {
		w.fail(ctx, r, report)
	}
}

// fail reports a claimed job's failure, trying again while the server cannot be reached until
// ctx is done (see persist).
func (w *Worker) fail(ctx context.Context, r *runningJob, report FailReport) {
	w.mu.Lock()
	w.failed++
	w.mu.Unlock()
	report = sanitized(report)
	send := func() error {
		_, err := w.Client.Fail(context.Background(), r.job.JID, r.job.LeaseToken(), report)
		return err
	}
	err := w.persist(ctx, send)
	if errors.Is(err, ErrValidation) {
		// Not expected within the limits sanitized keeps to; still, a failure recorded without
		// its details beats one never recorded.
		w.Logger.Printf("werk worker %s: the server refused the failure of job %s (%v); sending it without details",
			w.WID, r.job.JID, err)
		report.Message, report.Backtrace = refusedMessage, []string{}
		err = w.persist(ctx, send)
	}
	if err != nil {
		w.reportSettle(r, err)
	}
}

const refusedMessage = "(the failure details were refused by the server)"

// The server's limits on a failure: errtype up to 200 characters, message and each backtrace line
// up to 10,000, no NUL anywhere; it refuses a failure over them, and the job would then wait out
// its lease on every attempt. The message is cut to 4,000 characters, as the Python worker cuts it.
const (
	maxErrType = 200
	maxMessage = 4000
	maxRetryIn = 365 * 24 * 3600 // seconds
)

// sanitized is report within the server's limits, whatever text the handler produced.
func sanitized(report FailReport) FailReport {
	report.ErrType = clean(report.ErrType, maxErrType)
	if report.ErrType == "" {
		report.ErrType = "error"
	}
	report.Message = clean(report.Message, maxMessage)
	if len(report.Backtrace) > maxBacktraceLines {
		report.Backtrace = report.Backtrace[:maxBacktraceLines]
	}
	lines := make([]string, len(report.Backtrace))
	for i, line := range report.Backtrace {
		lines[i] = clean(line, maxBacktraceLine)
	}
	report.Backtrace = lines
	if report.RetryIn != nil && !(*report.RetryIn <= maxRetryIn) { // NaN included
		longest := float64(maxRetryIn)
		report.RetryIn = &longest
	}
	return report
}

// clean escapes NUL in text and keeps its first limit characters.
func clean(text string, limit int) string {
	text = strings.ReplaceAll(text, "\x00", "\\x00")
	n := 0
	for i := range text {
		if n == limit {
			return text[:i]
		}
		n++
	}
	return text
}

// Tries to deliver an ack or a failure the server did not take (each try is already retried by
// the client), and the longest wait between two: a server restarting is away for seconds, and an
// outcome given up leaves its job leased until the reservation expires. Fewer tries once the
// worker stops, so an outage does not hold its exit for long.
const (
	settleTries         = 6
	settleTriesStopping = 3
	settleBackoffFirst  = 500 * time.Millisecond
	settleBackoffCap    = 10 * time.Second
)

// The shortest interval between a lease's extensions, whatever its reservation.
const extendMin = 200 * time.Millisecond

// persist calls send until it succeeds, fails with what trying again cannot change (see
// retriable), or the tries are spent; it stops waiting when ctx is done (the job's ctx is at the
// end of the shutdown grace). Each job waits on its own: other jobs' outcomes go on.
func (w *Worker) persist(ctx context.Context, send func() error) error {
	delay := settleBackoffFirst
	for try := 1; ; try++ {
		err := send()
		if err == nil || !retriable(err) || try >= settleTries ||
			(try >= settleTriesStopping && w.stopping()) {
			return err
		}
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return err
		}
		if delay *= 2; delay > settleBackoffCap {
			delay = settleBackoffCap
		}
	}
}

// retriable: an ack or failure that failed with err may succeed when sent again (the server
// unreachable, a 500, a 429), as the Python worker judges it; not when the lease is gone or the
// server refused what was sent.
func retriable(err error) bool {
	_, ok := AsError(err)
	return ok && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrJobNotFound) &&
		!errors.Is(err, ErrValidation) && !errors.Is(err, ErrTooLarge)
}

func (w *Worker) reportSettle(r *runningJob, err error) {
	if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrJobNotFound) {
		return // the server gave the job to someone else, or it is gone: not ours
	}
	w.Logger.Printf("werk worker %s: could not settle job %s (the server will retry it when its lease expires): %v",
		w.WID, r.job.JID, err)
}

// ack acks the job with the result its handler set; a result the server refuses (too large, not
// storable) is logged and the job acked without it, so it does not run again.
func (w *Worker) ack(job *Job) (bool, error) {
	result := job.result
	if result != nil {
		// Encoded here and sent as encoded: a MarshalJSON that panics must not crash the worker,
		// nor one that answers differently the next time fail the batch it is sent with.
		if data, err := encodeResult(result); err != nil {
			w.Logger.Printf("werk worker %s: job %s: its result is not JSON (%v); acking without it", w.WID, job.JID, err)
			result = nil
		} else {
			result = json.RawMessage(data)
		}
	}
	if w.acks != nil {
		acked, err := w.acks.ack(job.JID, job.LeaseToken(), result)
		if !refusedBody(err) {
			return acked, err
		}
		// One refused result refuses its whole batch: each job of it acks on its own, where
		// only the refused result is dropped.
	}
	return true, w.ackOne(job, result)
}

func encodeResult(result any) (data []byte, err error) {
	encoded := false
	defer func() {
		if !encoded {
			err = fmt.Errorf("encoding it panicked: %s", (&panicError{value: recover()}).message())
		}
	}()
	data, err = json.Marshal(result)
	encoded = true
	return data, err
}

// ackOne acks in a request of its own; a result the server refuses is dropped so the job does
// not run again.
func (w *Worker) ackOne(job *Job, result any) error {
	ctx := context.Background()
	if result == nil {
		return w.Client.Ack(ctx, job.JID, job.LeaseToken())
	}
	err := w.Client.AckResult(ctx, job.JID, job.LeaseToken(), result)
	if refusedBody(err) {
		w.Logger.Printf("werk worker %s: job %s: the server refused its result (%v); acking without it", w.WID, job.JID, err)
		return w.Client.Ack(ctx, job.JID, job.LeaseToken())
	}
	return err
}

// refusedBody: the server refused what an ack carried (a result too large or not storable, or a
// batch too big).
func refusedBody(err error) bool {
	var werr *Error
	return errors.As(err, &werr) &&
		(werr.Code == "result_too_large" || werr.Code == "invalid_request" || werr.Code == "payload_too_large")
}
