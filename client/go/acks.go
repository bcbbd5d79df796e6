package werk

import (
	"context"
	"runtime"
	"sync"
)

// ackBatcher sends the acks of completed jobs together (group commit): the first ack goes out at
// once, and acks that complete while a request is in flight go together in the next
// POST /v1/ack. Idle, that is one request per job; busy, hundreds of jobs share one. Each caller
// waits for its own job's outcome, so a job counts as done only once the server confirmed it.
type ackBatcher struct {
	client   *Client
	mu       sync.Mutex
	pending  []pendingAck
	flushing bool
}

type pendingAck struct {
	item AckItem
	done chan ackOutcome
}

type ackOutcome struct {
	acked bool
	err   error
}

// ack reports whether the job was acknowledged, with result unless nil (false: the lease was no
// longer ours), or the client's error when the batch request failed after its retries. result must
// marshal to JSON: one that does not would fail the whole batch.
func (b *ackBatcher) ack(jid, lease string, result any) (bool, error) {
	done := make(chan ackOutcome, 1)
	b.mu.Lock()
	b.pending = append(b.pending, pendingAck{AckItem{JID: jid, Lease: lease, Result: result}, done})
	start := !b.flushing
	b.flushing = true
	b.mu.Unlock()
	if start {
		go b.flush()
	}
	out := <-done
	return out.acked, out.err
}

func (b *ackBatcher) flush() {
	// The jobs of one fetch end together: letting the goroutines already runnable go first puts
	// their acks in this request rather than leaving all but the first for the next one. Idle,
	// nothing else is runnable and this costs nothing.
	runtime.Gosched()
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		n := len(b.pending)
		if n > MaxBatch {
			n = MaxBatch
		}
		batch := b.pending[:n:n]
		b.pending = append([]pendingAck(nil), b.pending[n:]...)
		b.mu.Unlock()

		items := make([]AckItem, len(batch))
		for i, p := range batch {
			items[i] = p.item
		}
		result, err := b.client.AckMany(context.Background(), items)
		acked := map[string]bool{}
		if err == nil {
			for _, jid := range result.Acked {
				acked[jid] = true
			}
		}
		for _, p := range batch {
			p.done <- ackOutcome{acked: acked[p.item.JID], err: err}
		}
	}
}
