package werk

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// connTransport is the client's HTTP/1.1 transport: keep-alive connections to the server, each
// exchange written and read by the calling goroutine. net/http's Transport hands every request
// to a writer and a reader goroutine of its connection, and those hand-offs cost a producer
// pushing one job at a time, and a worker's push-to-handler latency, more than the rest of its
// work. Requests and answers are still written and parsed by net/http (Request.Write,
// ReadResponse). One request at a time per connection; idle connections are reused newest
// first, and dropped once idle long before the server would close them, so a request is never
// written on a connection the server is closing.
type connTransport struct {
	dialer net.Dialer
	mu     sync.Mutex
	idle   map[connKey][]*conn
}

// connKey is what a connection is to: the scheme and host of a request's URL.
type connKey struct{ scheme, host string }

// A connection idle longer than this is closed instead of reused (the server keeps an idle
// connection far longer).
const keepaliveExpiry = 5 * time.Second

const maxIdlePerHost = 64

type conn struct {
	net.Conn
	r         *bufio.Reader
	w         *bufio.Writer
	idleSince time.Time
}

// Answers up to this size are read into a buffer of the size their Content-Length says; a
// larger one is read as it arrives (no allocation on the word of a header alone).
const exactBodyMax = 16 << 20

// answerBody is an answer read whole: Client.once takes its bytes without copying them again.
type answerBody struct {
	bytes.Reader
	data []byte
}

func (*answerBody) Close() error { return nil }

// release gives the answer's buffer back to the pools: its caller holds nothing that points into
// it any more (what was decoded from it was copied).
func (b *answerBody) release() {
	putBuffer(b.data)
	b.data = nil
	b.Reset(nil)
}

// Buffers of at least this size (the full answer to a batch push, its request's body) are used
// again, from one pool for each power of two: a large buffer allocated anew is zeroed, then
// swept and given back by the garbage collector, once per request.
const pooledMin = 32 << 10

var buffers [bits.UintSize]sync.Pool

// getBuffer is a buffer of n bytes, from the pools when it is large.
func getBuffer(n int) []byte {
	if n < pooledMin {
		return make([]byte, n)
	}
	class := bits.Len(uint(n - 1))
	if b, ok := buffers[class].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<class)
}

// putBuffer gives b back to the pools, when it is one of theirs: nothing may use it after.
func putBuffer(b []byte) {
	if b = b[:cap(b)]; len(b) >= pooledMin && len(b)&(len(b)-1) == 0 {
		buffers[bits.Len(uint(len(b)-1))].Put(&b)
	}
}

// deadlineKey carries a request's deadline when no context timer does (Client.once).
type deadlineKey struct{}

// An instant long past: a deadline that interrupts a blocked read or write at once.
var longAgo = time.Unix(1, 0)

func newConnTransport() *connTransport {
	return &connTransport{dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
}

func (t *connTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		closeBody(req)
		return nil, fmt.Errorf("werk: unsupported URL scheme %q", req.URL.Scheme)
	}
	c, err := t.get(req.Context(), connKey{req.URL.Scheme, req.URL.Host}, req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.exchange(c, req)
	if err != nil {
		c.Close()
		return nil, err
	}
	return resp, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// get takes the newest idle connection to key, else dials a new one.
func (t *connTransport) get(ctx context.Context, key connKey, req *http.Request) (*conn, error) {
	now := time.Now()
	t.mu.Lock()
	for list := t.idle[key]; len(list) > 0; list = t.idle[key] {
		c := list[len(list)-1]
		t.idle[key] = list[:len(list)-1]
		if now.Sub(c.idleSince) < keepaliveExpiry {
			t.mu.Unlock()
			return c, nil
		}
		c.Close()
	}
	t.mu.Unlock()
	addr := req.URL.Host
	if req.URL.Port() == "" {
		port := "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(req.URL.Hostname(), port)
	}
	raw, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if req.URL.Scheme == "https" {
		tlsConn := tls.Client(raw, &tls.Config{ServerName: req.URL.Hostname(), NextProtos: []string{"http/1.1"}})
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		raw = tlsConn
	}
	var rw io.ReadWriter = raw
	if fast, ok := newRawIO(raw); ok {
		rw = fast
	}
	return &conn{Conn: raw, r: bufio.NewReaderSize(rw, 64<<10), w: bufio.NewWriterSize(rw, 8<<10)}, nil
}

// exchange writes req on c and reads the whole answer; c goes back to the idle connections
// when the answer leaves it reusable.
func (t *connTransport) exchange(c *conn, req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	deadline, _ := ctx.Deadline()
	own, set := ctx.Value(deadlineKey{}).(time.Time)
	if set && (deadline.IsZero() || own.Before(deadline)) {
		deadline = own
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	var resp *http.Response
	var data []byte
	var err error
	if ctx.Done() == nil {
		resp, data, err = c.roundTrip(req)
	} else {
		// A cancelled context interrupts the exchange through the connection's deadline; the
		// watcher leaves the connection alone once the exchange is over.
		var mu sync.Mutex
		over := false
		stop := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
				mu.Lock()
				if !over {
					_ = c.SetDeadline(longAgo)
				}
				mu.Unlock()
			case <-stop:
			}
		}()
		resp, data, err = c.roundTrip(req)
		mu.Lock()
		over = true
		mu.Unlock()
		close(stop)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if set && !time.Now().Before(own) && errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, context.DeadlineExceeded
		}
		return nil, err
	}
	body := &answerBody{data: data}
	body.Reset(data)
	resp.Body = body
	if resp.Close {
		c.Close()
	} else {
		t.put(connKey{req.URL.Scheme, req.URL.Host}, c)
	}
	return resp, nil
}

func (c *conn) roundTrip(req *http.Request) (*http.Response, []byte, error) {
	if err := req.Write(c.w); err != nil {
		return nil, nil, err
	}
	if err := c.w.Flush(); err != nil {
		return nil, nil, err
	}
	resp, err := http.ReadResponse(c.r, req)
	if err != nil {
		return nil, nil, err
	}
	var data []byte
	if n := resp.ContentLength; n >= 0 && n <= exactBodyMax {
		// One buffer of the answer's size: io.ReadAll grows one from 512 bytes, allocating
		// about twice the answer (a fetch of a hundred jobs, a batch push's full answer).
		data = getBuffer(int(n))
		_, err = io.ReadFull(resp.Body, data)
	} else {
		data, err = io.ReadAll(resp.Body)
	}
	resp.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	return resp, data, nil
}

func (t *connTransport) put(key connKey, c *conn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil {
		t.idle = map[connKey][]*conn{}
	}
	if len(t.idle[key]) >= maxIdlePerHost {
		c.Close()
		return
	}
	t.idle[key] = append(t.idle[key], c)
}

// CloseIdleConnections closes the connections not in use (http.Client.CloseIdleConnections).
func (t *connTransport) CloseIdleConnections() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, list := range t.idle {
		for _, c := range list {
			c.Close()
		}
		delete(t.idle, key)
	}
}
