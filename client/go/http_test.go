package werk

// The client against answers the Werk server itself does not send (chunked, framed
// by the close, a connection closed after the answer), from net/http's test server or a raw TCP
// one standing in for a proxy between client and server; and a cancelled long request.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestTransportChunkedAndReuse(t *testing.T) {
	var conns int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/prefix/v1/info" || r.Header.Get("Authorization") != "Bearer t0k" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"server":{"version":`))
		w.(http.Flusher).Flush() // no length: chunked
		_, _ = w.Write([]byte(`"chunked"}}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			atomic.AddInt32(&conns, 1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewClient(srv.URL + "/prefix")
	c.Token = "t0k"
	for i := 0; i < 3; i++ {
		info, err := c.Info(context.Background())
		if err != nil || info.Server.Version != "chunked" {
			t.Fatalf("info %d: %+v %v", i, info, err)
		}
	}
	if n := atomic.LoadInt32(&conns); n != 1 {
		t.Fatalf("%d connections for 3 sequential requests, want 1", n)
	}
}

// rawServer answers each request on a fresh connection with answer, then closes it.
func rawServer(t *testing.T, answer string) (string, *int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			atomic.AddInt32(&conns, 1)
			go func() {
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
					return
				}
				if answer != "" {
					_, _ = conn.Write([]byte(answer))
				} else {
					time.Sleep(5 * time.Second) // never answers in time
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), &conns
}

func TestTransportAnswerFramedByClose(t *testing.T) {
	url, conns := rawServer(t, "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"state\":\"quiet\"}")
	c := NewClient(url)
	for i := 0; i < 2; i++ {
		state, err := c.Beat(context.Background(), Beat{WID: "w"})
		if err != nil || state != "quiet" {
			t.Fatalf("beat %d: %q %v", i, state, err)
		}
	}
	if n := atomic.LoadInt32(conns); n != 2 {
		t.Fatalf("%d connections, want 2 (each answer closed its own)", n)
	}
}

func TestTransportTruncatedAnswerIsUnreachable(t *testing.T) {
	url, _ := rawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")
	c := NewClient(url)
	c.Retries = 0
	_, err := c.Info(context.Background())
	if e, ok := AsError(err); !ok || e.Code != "unreachable" {
		t.Fatalf("got %v, want an unreachable error", err)
	}
}

func TestTransportTimeoutAndCancel(t *testing.T) {
	url, _ := rawServer(t, "")
	c := NewClient(url)
	c.Retries = 0
	c.Timeout = 200 * time.Millisecond
	t0 := time.Now()
	if _, err := c.Info(context.Background()); err == nil {
		t.Fatal("no error from a server that never answers")
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("timed out after %v, want about 200ms", d)
	}
	c.Timeout = 10 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	t0 = time.Now()
	_, err := c.Fetch(ctx, FetchRequest{Queues: []string{"q"}, WID: "w", Wait: 5})
	if err == nil || !errors.Is(err, context.Canceled) && !strings.Contains(fmt.Sprint(err), "context canceled") {
		t.Fatalf("got %v, want the cancellation", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("cancelled after %v, want about 100ms", d)
	}
}

// A body far larger than the socket's buffers, sent to a server slow to read it, and an answer
// as large: the client writes and reads them whole, waiting on the socket as it fills. A server
// that never reads leaves the client's write waiting: the timeout ends it.
func TestTransportLargeBodiesAndAStalledWrite(t *testing.T) {
	body := make([]byte, 8<<20)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stall" {
			<-stall
			return
		}
		time.Sleep(100 * time.Millisecond)
		var got strings.Builder
		if _, err := io.Copy(&got, r.Body); err != nil || got.String() != `"`+string(body)+`"` {
			http.Error(w, fmt.Sprintf("a body of %d bytes, not the one sent (%v)", got.Len(), err), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jid":"` + string(body) + `"}`))
	}))
	defer srv.Close()
	defer close(stall) // before the server closes: it waits for its handlers
	c := NewClient(srv.URL)
	c.Retries = 0
	for i := 0; i < 2; i++ {
		var job Job
		if err := c.callWith(context.Background(), "POST", "/big", nil, string(body), &job, 0, true); err != nil || job.JID != string(body) {
			t.Fatalf("round %d: a jid of %d bytes (%v)", i, len(job.JID), err)
		}
	}
	c.Timeout = 300 * time.Millisecond
	t0 := time.Now()
	err := c.callWith(context.Background(), "POST", "/stall", nil, string(body), nil, 0, true)
	if e, ok := AsError(err); !ok || e.Code != "unreachable" {
		t.Fatalf("got %v, want an unreachable error", err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("timed out after %v, want about 300ms", d)
	}
}
