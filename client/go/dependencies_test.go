package werk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestFlowDependenciesAndResults(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-d")
	pushed, err := c.PushFlow(ctx, []JobSpec{
		{JobType: "a", Queue: queue, Ref: "a"},
		{JobType: "b", Queue: queue, Ref: "b", DependsOn: []any{"a"}},
		{JobType: "c", Queue: queue, Ref: "c", DependsOn: []any{Needs{Job: "b", OnFailure: "skip"}}},
	})
	if err != nil || len(pushed.Refs) != 3 || pushed.Jobs[1].State != "waiting" {
		t.Fatalf("push flow: %v %+v", err, pushed)
	}
	jobs, err := c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-deps", Count: 10})
	if err != nil || len(jobs) != 1 || jobs[0].JID != pushed.Refs["a"] {
		t.Fatalf("fetch a: %v %+v", err, jobs)
	}
	if err := c.AckResult(ctx, jobs[0].JID, jobs[0].LeaseToken(), map[string]any{"rows": 3}); err != nil {
		t.Fatal(err)
	}
	jobs, err = c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-deps", Count: 10})
	if err != nil || len(jobs) != 1 || jobs[0].JID != pushed.Refs["b"] {
		t.Fatalf("fetch b: %v %+v", err, jobs)
	}
	no := false
	var got map[string]int
	if ok, err := jobs[0].DependencyResult("a", &got); !ok || err != nil || got["rows"] != 3 {
		t.Fatalf("dependency result: %v %v %+v", ok, err, got)
	}
	if _, err := c.Fail(ctx, jobs[0].JID, jobs[0].LeaseToken(), FailReport{ErrType: "E", Message: "m", Retry: &no}); err != nil {
		t.Fatal(err)
	}
	skipped, err := c.Get(ctx, pushed.Refs["c"])
	if err != nil || skipped.State != "skipped" {
		t.Fatalf("c: %v %+v", err, skipped)
	}
	_, err = c.PushFlow(ctx, []JobSpec{{JobType: "x", Queue: queue, Ref: "x", DependsOn: []any{"x"}}})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Code != "dependency_cycle" {
		t.Fatalf("cycle: %v", err)
	}
}

// dependencyCount dependencies with results of resultSize bytes each add up to more than one
// answer carries (WERK_MAX_DEPENDENCY_RESULTS_BYTES, 1 MiB by default): some are left out.
const (
	dependencyCount = 20
	resultSize      = 60_000
)

// largeDependencies pushes dependencyCount jobs to a fresh queue and, for each queue name given,
// a job depending on all of them in a fresh queue of its own, then acks each dependency with a
// result of its own of about resultSize bytes. It answers the dependencies' jids (in jid order),
// their results as the server stores them (JSON), and the dependents.
func largeDependencies(t *testing.T, c *Client, dependents ...string) ([]string, map[string]string, []*Job) {
	t.Helper()
	ctx := context.Background()
	queue := uniqueQueue("go-dr")
	specs := make([]JobSpec, dependencyCount)
	for i := range specs {
		specs[i] = JobSpec{JobType: "part", Args: []any{i}, Queue: queue}
	}
	jids, needs := pushedDependencies(t, c, specs)
	var waiting []*Job
	for _, prefix := range dependents {
		job, err := c.Push(ctx, JobSpec{JobType: "join", Queue: uniqueQueue(prefix), DependsOn: needs, ReserveFor: 60})
		if err != nil || job.State != "waiting" {
			t.Fatalf("push the dependent: %v %+v", err, job)
		}
		waiting = append(waiting, job)
	}
	results := map[string]string{}
	for len(results) < len(jids) {
		fetched, err := c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-dr", Count: dependencyCount})
		if err != nil || len(fetched) == 0 {
			t.Fatalf("fetch the dependencies: %v (%d acked)", err, len(results))
		}
		for _, job := range fetched {
			n := int(job.Args[0].(float64))
			result := fmt.Sprintf("%02d:", n) + strings.Repeat(string(rune('a'+n)), resultSize-3)
			if err := c.AckResult(ctx, job.JID, job.LeaseToken(), result); err != nil {
				t.Fatal(err)
			}
			encoded, _ := json.Marshal(result)
			results[job.JID] = string(encoded)
		}
	}
	return jids, results, waiting
}

// pushedDependencies pushes specs and answers their jids in jid order, also as a DependsOn.
func pushedDependencies(t *testing.T, c *Client, specs []JobSpec) ([]string, []any) {
	t.Helper()
	pushed, err := c.PushMany(context.Background(), specs)
	if err != nil {
		t.Fatal(err)
	}
	jids := append([]string(nil), pushed.JIDs...)
	sort.Strings(jids)
	needs := make([]any, len(jids))
	for i, jid := range jids {
		needs[i] = jid
	}
	return jids, needs
}

// checkAllResults: deps are the dependencies jids name, in that order, each completed with the
// result it was acked with and none left out.
func checkAllResults(t *testing.T, deps []Dependency, jids []string, results map[string]string) {
	t.Helper()
	if len(deps) != len(jids) {
		t.Fatalf("%d dependencies, want %d", len(deps), len(jids))
	}
	for i, d := range deps {
		if d.JID != jids[i] || d.ResultOmitted || d.Outcome == nil || *d.Outcome != "completed" ||
			string(d.Result) != results[d.JID] {
			t.Fatalf("dependency %d: %s (want %s), omitted %v, outcome %v, result of %d bytes starting %.10s",
				i, d.JID, jids[i], d.ResultOmitted, d.Outcome, len(d.Result), d.Result)
		}
	}
}

// A read of the job carries the results within the server's budget and marks the rest left out;
// Dependencies reads every one of them, in jid order.
func TestOmittedDependencyResultsAreReadInPages(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	jids, results, dependents := largeDependencies(t, c, "go-dr-get")
	read, err := c.Get(ctx, dependents[0].JID)
	if err != nil || read.State != "available" || len(read.Dependencies) != len(jids) {
		t.Fatalf("get: %v %+v", err, read)
	}
	omitted := 0
	for i, d := range read.Dependencies {
		if d.JID != jids[i] || d.Outcome == nil || *d.Outcome != "completed" {
			t.Fatalf("dependency %d: %+v", i, d)
		}
		if d.ResultOmitted {
			omitted++
			if d.Result != nil && string(d.Result) != "null" {
				t.Fatalf("dependency %d is left out with a result of %d bytes", i, len(d.Result))
			}
			var s string
			if ok, err := read.DependencyResult(d.JID, &s); !ok || err == nil {
				t.Fatalf("the result of a dependency left out decoded: %v %v", ok, err)
			}
		} else if omitted > 0 || string(d.Result) != results[d.JID] {
			t.Fatalf("dependency %d carried after one left out, or with another result", i)
		}
	}
	if omitted == 0 || omitted == len(jids) {
		t.Fatalf("%d of %d results left out: the answer's budget is not what this test expects", omitted, len(jids))
	}
	all, err := c.Dependencies(ctx, dependents[0].JID)
	if err != nil {
		t.Fatal(err)
	}
	checkAllResults(t, all, jids, results)
	if _, err := c.Dependencies(ctx, "go-no-such-job-"+NewJID()); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("the dependencies of no job: %v", err)
	}
	alone, err := c.Push(ctx, JobSpec{JobType: "alone", Queue: uniqueQueue("go-dr-alone")})
	if err != nil {
		t.Fatal(err)
	}
	if none, err := c.Dependencies(ctx, alone.JID); err != nil || none == nil || len(none) != 0 {
		t.Fatalf("the dependencies of a job with none: %v %#v", err, none)
	}
}

// dependencyReads watches a client's requests for dependency pages: their cursors, the lease
// extensions sent while one is under way, and a delay or a refusal of its own.
type dependencyReads struct {
	next   http.RoundTripper
	delay  time.Duration
	refuse bool

	mu                  sync.Mutex
	cursors             []string
	reading             int // requests for dependency pages under way
	extendsWhileReading int
}

func (d *dependencyReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/extend") {
		d.mu.Lock()
		if d.reading > 0 {
			d.extendsWhileReading++
		}
		d.mu.Unlock()
	}
	if !strings.HasSuffix(req.URL.Path, "/dependencies") {
		return d.next.RoundTrip(req)
	}
	d.mu.Lock()
	d.cursors = append(d.cursors, req.URL.Query().Get("cursor"))
	d.reading++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.reading--
		d.mu.Unlock()
	}()
	time.Sleep(d.delay)
	if d.refuse {
		return &http.Response{StatusCode: http.StatusInternalServerError, Request: req,
			Header: http.Header{"Content-Type": {"application/problem+json"}},
			Body:   io.NopCloser(strings.NewReader(`{"code":"internal_error","detail":"refused by the test"}`))}, nil
	}
	return d.next.RoundTrip(req)
}

// The worker fills in what the fetch left out before the handler runs, reading from the page
// that holds the first result left out, its lease extended meanwhile.
func TestWorkerFillsOmittedDependencyResults(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	jids, results, dependents := largeDependencies(t, c, "go-dr-work")
	read, err := c.Get(ctx, dependents[0].JID)
	if err != nil {
		t.Fatal(err)
	}
	first := -1
	for i, d := range read.Dependencies {
		if d.ResultOmitted {
			first = i
			break
		}
	}
	if first < 1 {
		t.Fatalf("the first result left out is at %d: the answer's budget is not what this test expects", first)
	}
	watch := &dependencyReads{next: c.HTTP.Transport, delay: 1600 * time.Millisecond}
	c.HTTP = &http.Client{Transport: watch}
	w := quietWorker(c, dependents[0].Queue)
	w.ExtendAt = 0.01 // every 0.6 s for a reservation of 60 s
	var seen []Dependency
	var seenResult string
	w.Register("join", func(ctx context.Context, job *Job) error {
		seen = append([]Dependency(nil), job.Dependencies...)
		_, err := job.DependencyResult(jids[len(jids)-1], &seenResult)
		return err
	})
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 20*time.Second, "the dependent settled", func() bool { return w.Processed()+w.Failed() > 0 })
	w.Stop()
	<-done
	if w.Processed() != 1 {
		t.Fatalf("processed %d, failed %d", w.Processed(), w.Failed())
	}
	checkAllResults(t, seen, jids, results)
	if want, _ := json.Marshal(seenResult); string(want) != results[jids[len(jids)-1]] {
		t.Fatalf("DependencyResult gave %d bytes starting %.10s", len(seenResult), seenResult)
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.cursors) != 1 || watch.cursors[0] != jids[first-1] {
		t.Fatalf("read the pages after %q, want one page after %q (the dependency before the first left out)",
			watch.cursors, jids[first-1])
	}
	if watch.extendsWhileReading == 0 {
		t.Fatal("the lease was not extended while the dependencies were read")
	}
}

// Results that cannot be read fail the attempt, as a handler's error would: the handler does not
// run and the job is retried later, not left leased.
func TestWorkerFailsAJobWhoseOmittedResultsCannotBeRead(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	_, _, dependents := largeDependencies(t, c, "go-dr-fail")
	c.HTTP = &http.Client{Transport: &dependencyReads{next: c.HTTP.Transport, refuse: true}}
	w := quietWorker(c, dependents[0].Queue)
	var ran atomic.Int32
	w.Register("join", func(ctx context.Context, job *Job) error { ran.Add(1); return nil })
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 20*time.Second, "the dependent settled", func() bool { return w.Processed()+w.Failed() > 0 })
	w.Stop()
	<-done
	job, err := c.Get(ctx, dependents[0].JID)
	if err != nil || ran.Load() != 0 || w.Failed() != 1 || job.State != "scheduled" || job.Failure == nil ||
		job.Failure.ErrType != "werk.Error" || !strings.Contains(job.Failure.Message, "internal_error") {
		t.Fatalf("ran %d, failed %d: %v %+v", ran.Load(), w.Failed(), err, job)
	}
}

// One answer lists the server's WERK_MAX_DEPENDENCIES_LISTED (10,000) dependencies: of two
// dependents of 6,000 jobs each, fetched together, the second is listed only in part (its first
// 4,000), and the Worker reads the rest from its pages before the handler runs.
func TestWorkerReadsTheDependenciesAFetchDidNotList(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	const many = 6_000
	depQueue, queue := uniqueQueue("go-many-deps"), uniqueQueue("go-many-dependent")
	specs := make([]JobSpec, many)
	for i := range specs {
		specs[i] = JobSpec{JobType: "part", Queue: depQueue}
	}
	jids, needs := pushedDependencies(t, c, specs)
	for i := 0; i < 2; i++ {
		if _, err := c.Push(ctx, JobSpec{JobType: "join", Queue: queue, DependsOn: needs}); err != nil {
			t.Fatal(err)
		}
	}
	for left := many; left > 0; {
		fetched, err := c.Fetch(ctx, FetchRequest{Queues: []string{depQueue}, WID: "go-many", Count: 100})
		if err != nil || len(fetched) == 0 {
			t.Fatalf("fetch the dependencies: %v (%d left)", err, left)
		}
		acks := make([]AckItem, len(fetched))
		for i, job := range fetched {
			acks[i] = AckItem{JID: job.JID, Lease: job.LeaseToken()}
		}
		if _, err := c.AckMany(ctx, acks); err != nil {
			t.Fatal(err)
		}
		left -= len(fetched)
	}
	watch := &dependencyReads{next: c.HTTP.Transport}
	c.HTTP = &http.Client{Transport: watch}
	w := quietWorker(c, queue)
	var mu sync.Mutex
	var seen [][]string
	w.Register("join", func(ctx context.Context, job *Job) error {
		got := make([]string, len(job.Dependencies))
		for i, d := range job.Dependencies {
			got[i] = d.JID
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, got)
		if job.DependenciesOmitted {
			return errors.New("still marked DependenciesOmitted")
		}
		return nil
	})
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 30*time.Second, "both dependents settled", func() bool { return w.Processed()+w.Failed() >= 2 })
	w.Stop()
	<-done
	if w.Processed() != 2 {
		t.Fatalf("processed %d, failed %d", w.Processed(), w.Failed())
	}
	for _, got := range seen {
		if strings.Join(got, ",") != strings.Join(jids, ",") {
			t.Fatalf("the handler saw %d dependencies, want all %d in jid order", len(got), len(jids))
		}
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.cursors) != 2 || watch.cursors[0] != jids[3999] || watch.cursors[1] != jids[4999] {
		t.Fatalf("read the pages after %q, want two pages after the last one listed", watch.cursors)
	}
}
