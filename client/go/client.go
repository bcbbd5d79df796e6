// Package werk is a client and worker for the Werk background-job server, using only the
// standard library.
//
//	c := werk.NewClient("")           // WERK_URL, else http://127.0.0.1:7420; token WERK_TOKEN
//	job, err := c.Push(ctx, werk.JobSpec{JobType: "send_email", Args: []any{"ada@example.com"}})
package werk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Version of this client.
const Version = "0.1.0"

// MaxBatch is the number of jobs per batch push / ack request (the server's default limit).
const MaxBatch = 1000

// Client speaks the Werk HTTP API: one method per endpoint. It is safe for concurrent use.
type Client struct {
	URL   string
	Token string
	// Timeout of one request, on top of a fetch's long-poll wait (default 10 s).
	Timeout time.Duration
	// Retries after the first try for transient failures (unreachable, 502/503/504); default 3.
	Retries int
	HTTP    *http.Client
}

// NewClient returns a client for url ("" means WERK_URL, else http://127.0.0.1:7420), with the
// token from WERK_TOKEN.
func NewClient(baseURL string) *Client {
	if baseURL == "" {
		baseURL = os.Getenv("WERK_URL")
	}
	if baseURL == "" {
		baseURL = "http://127.0.0.1:7420"
	}
	return &Client{
		URL:     strings.TrimRight(baseURL, "/"),
		Token:   os.Getenv("WERK_TOKEN"),
		Timeout: 10 * time.Second,
		Retries: 3,
		HTTP:    &http.Client{Transport: transportFor(baseURL)},
	}
}

// transportFor is the client's own transport (connTransport), or net/http's when the
// environment names a proxy for baseURL (HTTP_PROXY, HTTPS_PROXY, NO_PROXY): speaking to proxies
// is net/http's.
func transportFor(baseURL string) http.RoundTripper {
	if u, err := url.Parse(baseURL); err == nil {
		if proxy, _ := http.ProxyFromEnvironment(&http.Request{URL: u}); proxy != nil {
			transport := http.DefaultTransport.(*http.Transport).Clone()
			transport.MaxIdleConnsPerHost = 64
			// The server never compresses its answers: asking for gzip only wraps every body in a reader.
			transport.DisableCompression = true
			return transport
		}
	}
	return newConnTransport()
}

// Header values shared by every request (net/http only reads them), and the headers of a
// request with no token and no others, shared whole where nothing adds to them (Client.once).
var (
	jsonType    = []string{"application/json"}
	userAgent   = []string{"werk-client-go/" + Version}
	plainHeader = http.Header{"Content-Type": jsonType, "Accept": jsonType, "User-Agent": userAgent}
)

// NewJID returns a new job id, in the form the server gives jobs pushed without one: the Unix
// time in milliseconds above a 68-bit number, as 28 hex digits. The first jid of a millisecond
// takes a random start and the others count up from it, so a process's jids only grow: a batch's
// keys land side by side in the job table's primary key instead of each on a page of its own.
func NewJID() string {
	jids := reserveJIDs(1)
	var jid [28]byte
	jids.write(&jid)
	return string(jid[:])
}

// jidRun is a run of consecutive jids reserved together, hi and lo the next one's parts.
type jidRun struct{ hi, lo uint64 }

func (r *jidRun) write(jid *[28]byte) {
	hexDigits(jid[:12], r.hi)
	hexDigits(jid[12:], r.lo)
	if r.lo++; r.lo == 0 {
		r.hi++
	}
}

// append appends the next jid as a JSON string.
func (r *jidRun) append(b []byte) []byte {
	var jid [28]byte
	r.write(&jid)
	b = append(b, '"')
	b = append(b, jid[:]...)
	return append(b, '"')
}

// reserveJIDs reserves n jids (none when n is 0): the first as NewJID would give it, the others
// counting up from it, as NewJID gives those of one millisecond. A batch push takes the clock
// and the lock once, not once a job.
func reserveJIDs(n int) jidRun {
	if n == 0 {
		return jidRun{}
	}
	ms := uint64(time.Now().UnixMilli())
	minted.Lock()
	defer minted.Unlock()
	if minted.hi>>4 < ms {
		if minted.used == 0 || minted.used+9 > len(minted.random) {
			// Random bytes for many milliseconds at once: one system call each, not one per jid.
			if _, err := rand.Read(minted.random[:]); err != nil {
				panic(err)
			}
			minted.used = 0
		}
		b := minted.random[minted.used : minted.used+9]
		minted.used += 9
		minted.hi = ms<<4 | uint64(b[0]>>4)
		minted.lo = binary.BigEndian.Uint64(b[1:])
	} else if minted.lo++; minted.lo == 0 {
		minted.hi++
	}
	run := jidRun{minted.hi, minted.lo}
	// minted is left at the last jid of the run.
	if lo := minted.lo + uint64(n-1); lo < minted.lo {
		minted.hi, minted.lo = minted.hi+1, lo
	} else {
		minted.lo = lo
	}
	return run
}

// hexDigits writes the low len(dst) hex digits of v into dst, zero-padded.
func hexDigits(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = "0123456789abcdef"[v&15]
		v >>= 4
	}
}

// minted is the last jid NewJID returned: 4 random bits below the milliseconds in hi, 64 in lo.
var minted struct {
	sync.Mutex
	hi, lo uint64
	random [64 * 9]byte // drawn from crypto/rand, each 9 bytes used once
	used   int
}

// Push enqueues one job and returns it as stored. A jid is assigned when none is given, so a
// retried push stores one job; pushing an existing jid again stores nothing new.
func (c *Client) Push(ctx context.Context, spec JobSpec) (*Job, error) {
	if err := checkSpecs(spec); err != nil {
		return nil, err
	}
	body, err := specBody(&spec)
	if err != nil {
		return nil, fmt.Errorf("werk: encoding the request: %w", err)
	}
	var job Job
	return &job, c.call(ctx, "POST", "/v1/jobs", body, &job, 0)
}

// PushMany enqueues jobs, MaxBatch per request; each request is all-or-nothing.
func (c *Client) PushMany(ctx context.Context, specs []JobSpec) (*PushManyResult, error) {
	if err := checkSpecs(specs...); err != nil {
		return nil, err
	}
	bodies, err := batchBodies(specs)
	if err != nil {
		return nil, fmt.Errorf("werk: encoding the request: %w", err)
	}
	defer c.recycle(bodies)
	// Each answer's jobs are decoded straight into the one list, sized for them all.
	merged := &PushManyResult{Jobs: make([]Job, 0, len(specs)), JIDs: make([]string, 0, len(specs)), Existed: []string{}}
	for k, body := range bodies {
		part := pushAnswer{jobs: merged.Jobs}
		if err := c.call(ctx, "POST", "/v1/jobs/batch", body, &part, 0); err != nil {
			return nil, err
		}
		if part.Jobs != nil {
			merged.Jobs = part.Jobs
		}
		merged.merge(k*MaxBatch, part.Created, part.JIDs, part.Existed, part.Conflicts, part.Refs)
	}
	return merged, nil
}

// recycle gives the bodies of sent requests back to the pools, when the client's own transport
// sent them: it writes a body whole before its call returns, where net/http's may still be
// reading one after.
func (c *Client) recycle(bodies []encoded) {
	if _, own := c.HTTP.Transport.(*connTransport); own {
		for _, body := range bodies {
			putBuffer(body)
		}
	}
}

// merge adds the answer to one request of a batch push, whose items start at index start of
// the whole input, to what the earlier requests answered.
func (p *PushManyResult) merge(start, created int, jids, existed []string, conflicts []UniqueConflict, refs map[string]string) {
	p.Created += created
	p.JIDs = append(p.JIDs, jids...)
	p.Existed = append(p.Existed, existed...)
	for _, c := range conflicts {
		c.Index += start
		p.Conflicts = append(p.Conflicts, c)
	}
	for ref, jid := range refs {
		if p.Refs == nil {
			p.Refs = map[string]string{}
		}
		p.Refs[ref] = jid
	}
}

// PushFlow pushes a graph of jobs in one request, all or nothing: items name each other by Ref
// in DependsOn; the answer's Refs maps each ref to its jid. A cycle or an unknown dependency is
// refused (APIError codes dependency_cycle, dependency_not_found) and nothing is stored.
func (c *Client) PushFlow(ctx context.Context, specs []JobSpec) (*PushManyResult, error) {
	if len(specs) > MaxBatch {
		return nil, fmt.Errorf("werk: a flow is pushed in one request: at most %d jobs", MaxBatch)
	}
	if err := checkSpecs(specs...); err != nil {
		return nil, err
	}
	bodies, err := batchBodies(specs)
	if err != nil {
		return nil, fmt.Errorf("werk: encoding the request: %w", err)
	}
	defer c.recycle(bodies)
	var result PushManyResult
	if err := c.call(ctx, "POST", "/v1/jobs/batch", bodies[0], &result, 0); err != nil {
		return nil, err
	}
	return &result, nil
}

// PushJIDs is PushMany answered with the jids only (Prefer: return=minimal), not the stored jobs.
func (c *Client) PushJIDs(ctx context.Context, specs []JobSpec) (*PushJIDsResult, error) {
	if err := checkSpecs(specs...); err != nil {
		return nil, err
	}
	bodies, err := batchBodies(specs)
	if err != nil {
		return nil, fmt.Errorf("werk: encoding the request: %w", err)
	}
	defer c.recycle(bodies)
	merged := &PushManyResult{JIDs: make([]string, 0, len(specs)), Existed: []string{}}
	minimal := map[string]string{"Prefer": "return=minimal"}
	for k, body := range bodies {
		var part PushJIDsResult
		if err := c.callWith(ctx, "POST", "/v1/jobs/batch", minimal, body, &part, 0, true); err != nil {
			return nil, err
		}
		merged.merge(k*MaxBatch, part.Created, part.JIDs, part.Existed, part.Conflicts, part.Refs)
	}
	return &PushJIDsResult{JIDs: merged.JIDs, Created: merged.Created, Existed: merged.Existed,
		Conflicts: merged.Conflicts, Refs: merged.Refs}, nil
}

// Get reads a job; ErrJobNotFound when there is none (completed jobs are deleted at ack).
func (c *Client) Get(ctx context.Context, jid string) (*Job, error) {
	var job Job
	return &job, c.call(ctx, "GET", "/v1/jobs/"+url.PathEscape(jid), nil, &job, 0)
}

// Dependencies reads every dependency of the job jid, in jid order, each with its result: those
// a fetch or Get left out (ResultOmitted) included. It follows the job's dependency pages to the
// last; ErrJobNotFound when the job is not stored.
func (c *Client) Dependencies(ctx context.Context, jid string) ([]Dependency, error) {
	all := []Dependency{}
	err := c.dependencyPages(ctx, jid, "", func(page []Dependency) bool {
		all = append(all, page...)
		return true
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// dependencyPageLimit is the most dependencies a page is asked for (the server's own limit): the
// server bounds the results' bytes of a page by its budget anyway.
const dependencyPageLimit = 1000

// dependencyPage is one answer of GET /v1/jobs/{jid}/dependencies; Next (nil: the last page) is
// the cursor of the following one.
type dependencyPage struct {
	Dependencies []Dependency `json:"dependencies"`
	Next         *string      `json:"next"`
}

// dependencyPages reads the dependency pages of the job jid after cursor (exclusive, a
// dependency's jid; "": from the first), giving each to page until it answers false or the last
// page is read.
func (c *Client) dependencyPages(ctx context.Context, jid, cursor string, page func([]Dependency) bool) error {
	base := "/v1/jobs/" + url.PathEscape(jid) + "/dependencies"
	for {
		query := url.Values{"limit": {strconv.Itoa(dependencyPageLimit)}}
		if cursor != "" {
			query.Set("cursor", cursor)
		}
		var out dependencyPage
		if err := c.call(ctx, "GET", withQuery(base, query), nil, &out, 0); err != nil {
			return err
		}
		if !page(out.Dependencies) || out.Next == nil {
			return nil
		}
		if len(out.Dependencies) == 0 || *out.Next == cursor {
			// Each page holds at least one dependency: another would be read forever.
			return fmt.Errorf("werk: the dependencies of job %s: a page after %q that moves no further", jid, cursor)
		}
		cursor = *out.Next
	}
}

// Info returns the server summary.
func (c *Client) Info(ctx context.Context) (*Info, error) {
	var info Info
	return &info, c.call(ctx, "GET", "/v1/info", nil, &info, 0)
}

// Fetch leases up to req.Count jobs, long-polling up to req.Wait seconds; an empty slice when none.
func (c *Client) Fetch(ctx context.Context, req FetchRequest) ([]Job, error) {
	var out fetched
	extra := time.Duration(req.Wait * float64(time.Second))
	if err := c.call(ctx, "POST", "/v1/fetch", req, &out, extra); err != nil {
		return nil, err
	}
	if out.Jobs == nil {
		out.Jobs = []Job{}
	}
	return out.Jobs, nil
}

// Ack reports success; ErrLeaseLost when the lease is not the job's current one.
func (c *Client) Ack(ctx context.Context, jid, lease string) error {
	return c.call(ctx, "POST", "/v1/jobs/"+url.PathEscape(jid)+"/ack", map[string]string{"lease": lease}, nil, 0)
}

// AckResult reports success with the job's result (nil: none), stored with a job pushed with
// KeepResultFor; a result above the server's limit is refused (code result_too_large, nothing acked).
func (c *Client) AckResult(ctx context.Context, jid, lease string, result any) error {
	body := map[string]any{"lease": lease}
	if result != nil {
		body["result"] = result
	}
	return c.call(ctx, "POST", "/v1/jobs/"+url.PathEscape(jid)+"/ack", body, nil, 0)
}

// Result reads the job's outcome, waiting up to wait seconds (the server's long-poll limit
// applies) for it to settle; ErrJobNotFound when it is not stored (a job is deleted at ack
// unless pushed with KeepResultFor).
func (c *Client) Result(ctx context.Context, jid string, wait float64) (*JobResult, error) {
	path := "/v1/jobs/" + url.PathEscape(jid) + "/result"
	if wait > 0 {
		path += "?wait=" + strconv.FormatFloat(wait, 'f', -1, 64)
	}
	var out JobResult
	return &out, c.call(ctx, "GET", path, nil, &out, time.Duration(wait*float64(time.Second)))
}

// AckMany acks (jid, lease) pairs; stale leases are listed in LeaseLost, not returned as errors.
func (c *Client) AckMany(ctx context.Context, acks []AckItem) (*AckManyResult, error) {
	merged := &AckManyResult{Acked: []string{}, LeaseLost: []string{}}
	for start := 0; start < len(acks); start += MaxBatch {
		end := start + MaxBatch
		if end > len(acks) {
			end = len(acks)
		}
		var part AckManyResult
		if err := c.call(ctx, "POST", "/v1/ack", map[string]any{"acks": acks[start:end]}, &part, 0); err != nil {
			return nil, err
		}
		merged.Acked = append(merged.Acked, part.Acked...)
		merged.LeaseLost = append(merged.LeaseLost, part.LeaseLost...)
	}
	return merged, nil
}

// Fail reports a failed attempt: the job retries after its backoff (or RetryIn), or is dead.
func (c *Client) Fail(ctx context.Context, jid, lease string, report FailReport) (*FailResult, error) {
	body := struct {
		Lease string `json:"lease"`
		FailReport
	}{lease, report}
	var out FailResult
	return &out, c.call(ctx, "POST", "/v1/jobs/"+url.PathEscape(jid)+"/fail", body, &out, 0)
}

// Extend pushes the lease's expiry forward and optionally records a progress checkpoint.
func (c *Client) Extend(ctx context.Context, jid, lease string, opts ExtendOptions) (*ExtendResult, error) {
	body := struct {
		Lease string `json:"lease"`
		ExtendOptions
	}{lease, opts}
	var out ExtendResult
	return &out, c.call(ctx, "POST", "/v1/jobs/"+url.PathEscape(jid)+"/extend", body, &out, 0)
}

// Beat sends a heartbeat; the answer is StateRunning, StateQuiet or StateTerminate.
func (c *Client) Beat(ctx context.Context, beat Beat) (string, error) {
	var out struct {
		State string `json:"state"`
	}
	return out.State, c.call(ctx, "POST", "/v1/beat", beat, &out, 0)
}

func (c *Client) call(ctx context.Context, method, path string, in, out any, extra time.Duration) error {
	return c.callWith(ctx, method, path, nil, in, out, extra, true)
}

// callWith is call with extra request headers. A request that is not repeatable (it would do its
// work twice) is sent again only when it surely never reached the server (the connection was
// refused) or the server answered that it did nothing (502, 503, 504).
func (c *Client) callWith(ctx context.Context, method, path string, headers map[string]string, in, out any, extra time.Duration, repeatable bool) error {
	payload, ready := in.(encoded)
	if in != nil && !ready {
		var err error
		if payload, err = json.Marshal(in); err != nil {
			return fmt.Errorf("werk: encoding the request: %w", err)
		}
	}
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, method, path, headers, payload, out, extra)
		e, ok := AsError(err)
		if err == nil || !ok || !e.transient() || attempt >= c.Retries || ctx.Err() != nil {
			return err
		}
		if !repeatable && e.Code == "unreachable" && !neverSent(e.Err) {
			return err
		}
		delay := time.Duration(math.Min(2000, 100*math.Pow(2, float64(attempt)))*(0.5+mrand.Float64()/2)) * time.Millisecond
		if e.RetryAfter > delay {
			delay = e.RetryAfter
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

func (c *Client) once(ctx context.Context, method, path string, headers map[string]string, payload []byte, out any, extra time.Duration) error {
	_, own := c.HTTP.Transport.(*connTransport)
	if own && c.HTTP.Timeout == 0 && ctx.Done() == nil {
		// Nothing can cancel the call but its timeout: the transport sets it on the connection
		// itself, with no context timer and no goroutine watching a context.
		ctx = context.WithValue(ctx, deadlineKey{}, time.Now().Add(c.Timeout+extra))
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout+extra)
		defer cancel()
	}
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, body)
	if err != nil {
		return err
	}
	if own && c.HTTP.Jar == nil && c.Token == "" && len(headers) == 0 {
		// Nothing writes to it: the client's own transport only reads a request's headers
		// (another may add its own to them, and a cookie jar adds cookies).
		req.Header = plainHeader
	} else {
		req.Header = http.Header{"Content-Type": jsonType, "Accept": jsonType, "User-Agent": userAgent}
		if c.Token != "" {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
		for name, value := range headers {
			req.Header.Set(name, value)
		}
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return &Error{Code: "unreachable", Detail: method + " " + path + ": " + err.Error(), Err: err}
	}
	defer resp.Body.Close()
	var data []byte
	if whole, ok := resp.Body.(*answerBody); ok {
		data = whole.data
		if own {
			// Only this call has seen the answer (no other transport wraps the client's own),
			// and what it decodes is copied out of it.
			defer whole.release()
		}
	} else if data, err = io.ReadAll(resp.Body); err != nil {
		return &Error{Code: "unreachable", Detail: "reading the answer: " + err.Error(), Err: err}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out == nil || len(data) == 0 {
			return nil
		}
		// The answers decoded in one pass check their JSON themselves (json.Unmarshal would
		// first read the whole answer once more to validate it).
		decode := json.Unmarshal
		if u, ok := out.(json.Unmarshaler); ok {
			decode = func(data []byte, _ any) error { return u.UnmarshalJSON(data) }
		}
		if err := decode(data, out); err != nil {
			return fmt.Errorf("werk: decoding the answer to %s %s: %w", method, path, err)
		}
		return nil
	}
	var problem struct {
		Code        string       `json:"code"`
		Detail      string       `json:"detail"`
		Errors      []FieldError `json:"errors"`
		ExistingJID string       `json:"existing_jid"`
	}
	_ = json.Unmarshal(data, &problem)
	if problem.Code == "" {
		problem.Code = "http_" + strconv.Itoa(resp.StatusCode)
		problem.Detail = strings.TrimSpace(string(data))
	}
	e := &Error{Code: problem.Code, Status: resp.StatusCode, Detail: problem.Detail, Errors: problem.Errors,
		ExistingJID: problem.ExistingJID}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// neverSent: the request failed before a connection existed, so the server saw nothing of it.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
