package werk

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"sync/atomic"
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

// hangingUp starts a server that reads each request and hangs up without answering (the
// request may have been done), for tests of what a client sends again; it counts the requests.
func hangingUp(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var requests atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
					requests.Add(1)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), &requests
}
