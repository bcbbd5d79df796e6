package werk

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// connTransport is the client's default http.RoundTripper: HTTP/1.1 keep-alive connections to
// the server, each request written and its answer read on the calling goroutine. net/http's
// Transport hands every request to a writer and a reader goroutine per connection; on a producer
// pushing one job at a time those hand-offs (and the thread wake-ups they cause) cost more CPU
// and time than the request itself. Requests and answers are still written and parsed by
// net/http (Request.Write, ReadResponse). With a proxy configured in the environment the client
// uses net/http's Transport instead (see NewClient).
type connTransport struct {
	dialer  net.Dialer
	tls     *tls.Config // for https://; nil: the defaults
	mu      sync.Mutex
	idle    map[string][]*conn // by scheme and host:port
	maxIdle int                // per scheme and host:port
}

type conn struct {
	net.Conn
	key       string
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

// A connection idle longer than this is closed instead of reused: the server (or a proxy in
// between) may be closing it just as a request is written on it.
const keepAliveExpiry = 5 * time.Second

// A deadline in the past: makes a blocked read or write return at once.
var longAgo = time.Unix(1, 0)

// exchange is one request's watch on its context: a cancellation cuts the connection's deadline
// short, unless the exchange ended first (the connection may serve someone else by then).
type exchange struct {
	mu        sync.Mutex
	over      bool
	cancelled bool
	done      chan struct{}
}

func (x *exchange) watch(ctx context.Context, c net.Conn) {
	select {
	case <-ctx.Done():
		x.mu.Lock()
		if !x.over {
			x.cancelled = true
			_ = c.SetDeadline(longAgo)
		}
		x.mu.Unlock()
	case <-x.done:
	}
}

// end reports whether the exchange ended uncancelled, so its connection may be reused.
func (x *exchange) end() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.over {
		x.over = true
		close(x.done)
	}
	return !x.cancelled
}

func (t *connTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	c, err := t.get(ctx, req.URL)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	// The deadline covers the whole exchange; a cancellation cuts it short.
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	x := &exchange{done: make(chan struct{})}
	go x.watch(ctx, c)
	fail := func(err error) (*http.Response, error) {
		x.end()
		c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err := req.Write(c.bw); err != nil {
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return fail(err)
	}
	resp.Body = &answerBody{body: resp.Body, c: c, t: t, x: x, reuse: !resp.Close, ctx: ctx}
	return resp, nil
}

// get returns an idle connection to the URL's server or a new one.
func (t *connTransport) get(ctx context.Context, u *url.URL) (*conn, error) {
	secure := u.Scheme == "https"
	if !secure && u.Scheme != "http" {
		return nil, fmt.Errorf("unsupported URL scheme %q", u.Scheme)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if secure {
			port = "443"
		}
	}
	host := u.Hostname()
	addr := net.JoinHostPort(host, port)
	key := u.Scheme + "://" + addr
	now := time.Now()
	t.mu.Lock()
	for idle := t.idle[key]; len(idle) > 0; idle = t.idle[key] {
		c := idle[len(idle)-1]
		t.idle[key] = idle[:len(idle)-1]
		if now.Sub(c.idleSince) < keepAliveExpiry {
			t.mu.Unlock()
			return c, nil
		}
		c.Close()
	}
	t.mu.Unlock()
	raw, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
	if secure {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if t.tls != nil {
			cfg = t.tls.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		raw = tc
	}
	return &conn{Conn: raw, key: key, br: bufio.NewReader(raw), bw: bufio.NewWriter(raw)}, nil
}

func (t *connTransport) put(c *conn) {
	_ = c.SetDeadline(time.Time{})
	c.idleSince = time.Now()
	t.mu.Lock()
	if len(t.idle[c.key]) < t.maxIdle {
		if t.idle == nil {
			t.idle = map[string][]*conn{}
		}
		t.idle[c.key] = append(t.idle[c.key], c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// CloseIdleConnections closes the idle connections (http.Client calls it).
func (t *connTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, conns := range idle {
		for _, c := range conns {
			c.Close()
		}
	}
}

// answerBody gives the connection back once the answer has been read to its end, and closes it
// when the answer is abandoned before that.
type answerBody struct {
	body     io.ReadCloser
	c        *conn
	t        *connTransport
	x        *exchange
	reuse    bool
	ctx      context.Context
	finished bool
}

func (b *answerBody) Read(p []byte) (int, error) {
	if b.finished {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	if errors.Is(err, io.EOF) {
		b.finish(b.reuse && b.c.br.Buffered() == 0)
	} else if err != nil {
		b.finish(false)
		if b.ctx.Err() != nil {
			err = b.ctx.Err()
		}
	}
	return n, err
}

func (b *answerBody) Close() error {
	b.finish(false)
	return nil
}

func (b *answerBody) finish(reuse bool) {
	if b.finished {
		return
	}
	b.finished = true
	if b.x.end() && reuse {
		b.t.put(b.c)
	} else {
		b.c.Close()
	}
}
