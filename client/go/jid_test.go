package werk

import (
	"fmt"
	"sync"
	"testing"
)

func TestJIDsGrowAndNeverRepeat(t *testing.T) {
	const goroutines, each = 8, 2000
	var mu sync.Mutex
	seen := make(map[string]bool, goroutines*each)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := ""
			for i := 0; i < each; i++ {
				jid := NewJID()
				if len(jid) != 28 || jid <= last {
					t.Errorf("jid %q after %q: want 28 hex digits, growing", jid, last)
					return
				}
				last = jid
				mu.Lock()
				if seen[jid] {
					t.Errorf("jid %q minted twice", jid)
				}
				seen[jid] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestJIDsAreTheHexOfTheirParts(t *testing.T) {
	for i := 0; i < 1000; i++ {
		jid := NewJID()
		minted.Lock()
		want := fmt.Sprintf("%012x%016x", minted.hi, minted.lo)
		minted.Unlock()
		if jid != want {
			t.Fatalf("jid %q, want %q", jid, want)
		}
	}
}
