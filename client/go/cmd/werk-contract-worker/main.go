// Command werk-contract-worker is the Go SDK's contract worker: the handlers every SDK's contract
// worker registers (see client/contract/README.md, "Worker scenarios"), configured from the
// environment.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	werk "github.com/werk-dev/werk/client/go"
)

func envInt(name string, fallback int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return fallback
}

func seconds(job *werk.Job) time.Duration {
	return time.Duration(job.Args[0].(float64) * float64(time.Second))
}

func main() {
	w := werk.NewWorker(werk.NewClient(""), strings.Split(os.Getenv("QUEUES"), ",")...)
	if raw := os.Getenv("WEIGHTS"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &w.Weights); err != nil {
			log.Fatal(err)
		}
	}
	w.Concurrency = envInt("CONCURRENCY", 5)
	w.FetchBatch = envInt("FETCH_BATCH", 100)
	w.FetchWait = 1
	w.BeatInterval = 500 * time.Millisecond
	w.ShutdownGrace = time.Duration(envInt("GRACE_MS", 5000)) * time.Millisecond
	w.TimeoutGrace = time.Duration(envInt("TIMEOUT_GRACE_MS", 300)) * time.Millisecond
	mark := func(name string) werk.Middleware {
		return func(next werk.Handler) werk.Handler {
			return func(ctx context.Context, job *werk.Job) error {
				if job.Custom == nil {
					job.Custom = map[string]any{}
				}
				marks, _ := job.Custom["marks"].([]any)
				job.Custom["marks"] = append(marks, name)
				return next(ctx, job)
			}
		}
	}
	w.Use(mark("outer"), mark("inner"))
	sleep := func(ctx context.Context, job *werk.Job) error {
		select {
		case <-time.After(seconds(job)):
			job.SetResult("finished")
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.Register("echo", func(ctx context.Context, job *werk.Job) error { job.SetResult(job.Args[0]); return nil })
	w.Register("slow", sleep, werk.WithTimeout(500*time.Millisecond))
	w.Register("stubborn", func(ctx context.Context, job *werk.Job) error {
		time.Sleep(seconds(job)) // ignores ctx
		job.SetResult("finished")
		return nil
	}, werk.WithTimeout(500*time.Millisecond))
	w.Register("sleep", sleep)
	w.Register("retry_in", func(ctx context.Context, job *werk.Job) error {
		return &werk.RetryInError{Delay: seconds(job), Type: "Later", Message: "come back later"}
	})
	w.Register("no_retry", func(ctx context.Context, job *werk.Job) error {
		return &werk.NoRetryError{Type: "Hopeless", Message: "cannot ever work"}
	})
	w.Register("marks", func(ctx context.Context, job *werk.Job) error { job.SetResult(job.Custom["marks"]); return nil })
	w.Register("resume", func(ctx context.Context, job *werk.Job) error {
		if len(job.Progress) == 0 || string(job.Progress) == "null" {
			if err := werk.Checkpoint(ctx, map[string]any{"step": 1}); err != nil {
				return err
			}
			return werk.RetryIn(0, errors.New("checkpointed"))
		}
		job.SetResult(job.Progress)
		return nil
	})
	var counter int64
	w.Register("order", func(ctx context.Context, job *werk.Job) error {
		job.SetResult(atomic.AddInt64(&counter, 1))
		return nil
	})
	if err := w.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
