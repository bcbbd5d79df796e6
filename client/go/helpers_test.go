package werk

import (
	"os"
	"testing"
	"time"
)

// testClient talks to the server in WERK_URL (the pytest driver starts one); without it the
// test is skipped, loudly.
func testClient(t *testing.T) *Client {
	t.Helper()
	url := os.Getenv("WERK_URL")
	if url == "" {
		t.Skip("WERK_URL not set: run through pytest (tests/e2e/clients/test_go.py), or start `werk serve` and set it")
	}
	return NewClient(url)
}

// uniqueQueue names a queue no other test uses: the whole jid, as its first digits are only the
// time (tests a few milliseconds apart would share them).
func uniqueQueue(prefix string) string { return prefix + "-" + NewJID() }

func eventually(t *testing.T, timeout time.Duration, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if check() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
