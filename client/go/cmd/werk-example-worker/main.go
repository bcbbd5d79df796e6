// A Werk worker in Go: handles "echo" jobs by appending them to OUT as JSON lines. Used by the
// cross-language tests (jobs pushed by other clients); also a minimal example.
//
//	WERK_URL=http://127.0.0.1:7420 QUEUE=default OUT=done.jsonl EXPECT=10 werk-example-worker
package main

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"strconv"
	"sync"

	werk "github.com/werk-dev/werk/client/go"
)

func main() {
	out, err := os.OpenFile(os.Getenv("OUT"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()
	expect, _ := strconv.Atoi(os.Getenv("EXPECT"))
	var mu sync.Mutex
	record := func(v map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		line, _ := json.Marshal(v)
		_, _ = out.Write(append(line, '\n'))
	}

	w := werk.NewWorker(werk.NewClient(""), os.Getenv("QUEUE"))
	w.Concurrency = 4
	w.FetchWait = 1
	done := 0
	w.Register("echo", func(ctx context.Context, job *werk.Job) error {
		record(map[string]any{"event": "done", "lang": "go", "jid": job.JID, "args": job.Args})
		mu.Lock()
		done++
		finished := expect > 0 && done >= expect
		mu.Unlock()
		if finished {
			go w.Stop()
		}
		return nil
	})
	if err := w.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	record(map[string]any{"event": "exit", "processed": w.Processed(), "failed": w.Failed()})
}
