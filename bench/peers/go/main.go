// The Go side of `python -m bench run peers`: Werk through its Go client (client/go), producer
// and worker in this one process, against the `werk serve` the harness runs. Commands arrive as
// JSON lines on stdin, answers leave as JSON lines on stdout (the protocol of
// bench/peers/node/driver.mjs).
//
//	werk-bench-peer '<options json>'
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	werk "github.com/werk-dev/werk/client/go"
)

const queue = "bench-peers"

type workerSettings struct {
	Concurrency int     `json:"concurrency"`
	FetchBatch  int     `json:"fetchBatch"`
	FetchWait   float64 `json:"fetchWait"`
}

type options struct {
	URL     string         `json:"url"`
	Work    workerSettings `json:"work"`
	Latency workerSettings `json:"latency"`
}

type command struct {
	Cmd        string  `json:"cmd"`
	Jobs       int     `json:"jobs"`
	Inflight   int     `json:"inflight"`
	Size       int     `json:"size"`
	IntervalMs float64 `json:"interval_ms"`
	SettleMs   float64 `json:"settle_ms"`
}

type driver struct {
	opts   options
	client *werk.Client
}

func spec(i int) werk.JobSpec {
	return werk.JobSpec{JobType: "noop", Args: []any{i}, Queue: queue}
}

func (d *driver) push(jobs, inflight int) (map[string]any, error) {
	var next int64 = -1
	var wg sync.WaitGroup
	errs := make(chan error, inflight)
	t0 := time.Now()
	for k := 0; k < inflight; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(atomic.AddInt64(&next, 1))
				if i >= jobs {
					return
				}
				if _, err := d.client.Push(context.Background(), spec(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return map[string]any{"jobs": jobs, "seconds": time.Since(t0).Seconds()}, nil
}

func (d *driver) batch(jobs, size int) (map[string]any, error) {
	t0 := time.Now()
	for first := 0; first < jobs; first += size {
		n := size
		if jobs-first < n {
			n = jobs - first
		}
		specs := make([]werk.JobSpec, n)
		for k := range specs {
			specs[k] = spec(first + k)
		}
		if _, err := d.client.PushMany(context.Background(), specs); err != nil {
			return nil, err
		}
	}
	return map[string]any{"jobs": jobs, "seconds": time.Since(t0).Seconds()}, nil
}

// startWorker runs a Worker with a no-op handler that reports each job's index at its start.
func (d *driver) startWorker(s workerSettings, onJob func(i int)) (stop func()) {
	w := werk.NewWorker(d.client, queue)
	w.Concurrency = s.Concurrency
	w.FetchBatch = s.FetchBatch
	w.FetchWait = s.FetchWait
	w.IgnoreSignals = true
	w.Register("noop", func(ctx context.Context, job *werk.Job) error {
		onJob(int(job.Args[0].(float64)))
		return nil
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(context.Background()); err != nil {
			log.Printf("worker: %v", err)
		}
	}()
	return func() { w.Stop(); <-done }
}

// work: the worker drains jobs pushed before it started; first handler start to last one.
func (d *driver) work(jobs int) (map[string]any, error) {
	var mu sync.Mutex
	var seen int
	var first, last time.Time
	finished := make(chan struct{})
	stop := d.startWorker(d.opts.Work, func(int) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if seen == 0 {
			first = now
		}
		seen++
		last = now
		if seen == jobs {
			close(finished)
		}
	})
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	if seen < jobs {
		return nil, fmt.Errorf("only %d of %d jobs were handled", seen, jobs)
	}
	return map[string]any{"jobs": jobs, "seconds": last.Sub(first).Seconds(), "handled": seen}, nil
}

// latency: one job every interval into an idle worker; push call to handler start, per job.
func (d *driver) latency(jobs int, interval, settle time.Duration) (map[string]any, error) {
	sent := make([]time.Time, jobs)
	var mu sync.Mutex
	delays := make([]float64, 0, jobs)
	finished := make(chan struct{})
	stop := d.startWorker(d.opts.Latency, func(i int) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		delays = append(delays, float64(now.Sub(sent[i]))/1e6)
		if len(delays) == jobs {
			close(finished)
		}
	})
	time.Sleep(settle)
	var pushes sync.WaitGroup
	var pushErr atomic.Value
	t0 := time.Now()
	for i := 0; i < jobs; i++ {
		if wait := time.Until(t0.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		pushes.Add(1)
		go func(i int) {
			defer pushes.Done()
			if _, err := d.client.Push(context.Background(), spec(i)); err != nil {
				pushErr.Store(err)
			}
		}(i)
	}
	pushes.Wait()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
	}
	stop()
	if err, ok := pushErr.Load().(error); ok {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if len(delays) < jobs {
		return nil, fmt.Errorf("only %d of %d jobs were handled", len(delays), jobs)
	}
	sort.Float64s(delays)
	return map[string]any{
		"jobs": jobs, "p50_ms": percentile(delays, 50), "p99_ms": percentile(delays, 99),
		"max_ms": delays[len(delays)-1],
	}, nil
}

func percentile(sorted []float64, p float64) float64 {
	k := float64(len(sorted)-1) * p / 100
	lo := int(k)
	hi := lo + 1
	if hi > len(sorted)-1 {
		hi = len(sorted) - 1
	}
	return sorted[lo] + (sorted[hi]-sorted[lo])*(k-float64(lo))
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	var opts options
	if len(os.Args) < 2 || json.Unmarshal([]byte(os.Args[1]), &opts) != nil {
		log.Fatal("usage: werk-bench-peer '<options json>'")
	}
	d := &driver{opts: opts, client: werk.NewClient(opts.URL)}
	out := json.NewEncoder(os.Stdout)
	_ = out.Encode(map[string]any{
		"ready": true, "pid": os.Getpid(),
		"versions": map[string]string{"go": runtime.Version(), "werk-client-go": werk.Version},
	})
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return
		}
		var c command
		if err := json.Unmarshal(line, &c); err != nil {
			log.Fatalf("bad command %q: %v", line, err)
		}
		if c.Cmd == "exit" {
			return
		}
		cpu0 := cpuSeconds()
		var result map[string]any
		switch c.Cmd {
		case "push":
			result, err = d.push(c.Jobs, c.Inflight)
		case "batch", "seed":
			result, err = d.batch(c.Jobs, c.Size)
		case "work":
			result, err = d.work(c.Jobs)
		case "latency":
			ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
			result, err = d.latency(c.Jobs, ms(c.IntervalMs), ms(c.SettleMs))
		default:
			err = fmt.Errorf("unknown command %q", c.Cmd)
		}
		if err != nil {
			_ = out.Encode(map[string]any{"ok": false, "error": err.Error()})
			continue
		}
		result["ok"] = true
		result["driver_cpu_s"] = cpuSeconds() - cpu0
		_ = out.Encode(result)
	}
}
