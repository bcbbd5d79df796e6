package werk

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingTransport counts the ack requests the worker sends, by kind.
type countingTransport struct {
	next          http.RoundTripper
	single, batch int32
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/v1/ack" {
		atomic.AddInt32(&c.batch, 1)
	} else if strings.HasSuffix(req.URL.Path, "/ack") {
		atomic.AddInt32(&c.single, 1)
	}
	return c.next.RoundTrip(req)
}

func runNoops(t *testing.T, jobs int, noBatch bool) *countingTransport {
	t.Helper()
	c := testClient(t)
	counter := &countingTransport{next: c.HTTP.Transport}
	c.HTTP = &http.Client{Transport: counter}
	queue := uniqueQueue("go-acks")
	specs := make([]JobSpec, jobs)
	for i := range specs {
		specs[i] = JobSpec{JobType: "noop", Args: []any{i}, Queue: queue}
	}
	if _, err := c.PushMany(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	w := quietWorker(c, queue)
	w.Concurrency = jobs
	w.NoBatchAck = noBatch
	w.Register("noop", func(ctx context.Context, job *Job) error { return nil })
	done := make(chan error)
	go func() { done <- w.Run(context.Background()) }()
	eventually(t, 20*time.Second, "jobs acked", func() bool { return w.Processed() == jobs })
	w.Stop()
	<-done
	left, err := c.Fetch(context.Background(), FetchRequest{Queues: []string{queue}, WID: "probe", Count: jobs})
	if err != nil || len(left) != 0 {
		t.Fatalf("left in the queue: %d (%v)", len(left), err)
	}
	return counter
}

func TestWorkerAcksCompletedJobsTogether(t *testing.T) {
	counter := runNoops(t, 60, false)
	if counter.single != 0 || counter.batch == 0 || counter.batch >= 60 {
		t.Fatalf("ack requests for 60 jobs: %d single, %d batch", counter.single, counter.batch)
	}
}

func TestWorkerNoBatchAckSendsOneRequestPerJob(t *testing.T) {
	counter := runNoops(t, 5, true)
	if counter.single != 5 || counter.batch != 0 {
		t.Fatalf("ack requests for 5 jobs: %d single, %d batch", counter.single, counter.batch)
	}
}
