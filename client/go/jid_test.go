package werk

import (
	"fmt"
	"sync"
	"testing"
	"time"
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

// A batch push reserves its jids as one run: they follow each other as NewJID's would, and the
// jids minted after the run follow its last.
func TestJIDRunsGrowAndNeverRepeat(t *testing.T) {
	const goroutines, each = 4, 200
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			last := ""
			for i := 0; i < each; i++ {
				var jids []string
				if i%2 == 0 {
					jids = append(jids, NewJID())
				} else {
					run := reserveJIDs(1 + (g+i)%40)
					for k := 0; k < 1+(g+i)%40; k++ {
						jids = append(jids, string(run.append(nil)))
					}
				}
				for _, jid := range jids {
					if i%2 == 1 {
						jid = jid[1 : len(jid)-1]
					}
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
			}
		}(g)
	}
	wg.Wait()

	// A run across the end of the low part carries into the high part. The last jid is put a
	// little ahead of the clock, so that the run counts up from it instead of starting afresh.
	minted.Lock()
	minted.hi = uint64(time.Now().UnixMilli()+200)<<4 | 0xe
	minted.lo = ^uint64(0) - 2
	hi := minted.hi
	minted.Unlock()
	run := reserveJIDs(5)
	var got []string
	for k := 0; k < 5; k++ {
		got = append(got, string(run.append(nil)))
	}
	want := []string{
		fmt.Sprintf(`"%012x%016x"`, hi, ^uint64(0)-1), fmt.Sprintf(`"%012x%016x"`, hi, ^uint64(0)),
		fmt.Sprintf(`"%012x%016x"`, hi+1, 0), fmt.Sprintf(`"%012x%016x"`, hi+1, 1), fmt.Sprintf(`"%012x%016x"`, hi+1, 2),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("a run across the carry: %v, want %v", got, want)
	}
	if next := NewJID(); `"`+next+`"` <= got[4] {
		t.Errorf("jid %q minted after the run ending at %s", next, got[4])
	}
}
