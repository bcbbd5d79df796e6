package werk

// The admin API: jobs listed and acted on (one or in bulk), queues, workers, history, batches.
// Acting on jobs changes them, so those requests are not sent again after a lost answer: a second
// cancel or delete would answer job_state_conflict or job_not_found for the job the first one
// changed, and a second bulk action would also act on jobs that came to match meanwhile. Pausing,
// resuming and signalling workers done twice are the same as once, and are repeated.

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// JobFilter says which jobs ListJobs lists (every filter given must match; zero values are left
// out): State, Queue, JobType, Q (words that begin words of the jobs' args, custom values,
// errtype or message) and Failed (jobs that failed at least once, or never). Order is "newest"
// (the server's default) or "oldest"; Cursor is a page's NextCursor, Limit the page's size
// (server default 50, at most 500).
type JobFilter struct {
	State   string
	Queue   string
	JobType string
	Q       string
	Failed  *bool
	Order   string
	Cursor  string
	Limit   int
}

// JobPage is a page of ListJobs; NextCursor (nil: the last page) asks for the next.
type JobPage struct {
	Jobs       []Job   `json:"jobs"`
	NextCursor *string `json:"next_cursor"`
}

// BulkFilter says which jobs a bulk action (RetryJobs, KillJobs, CancelJobs, DeleteJobs) covers,
// as JobFilter does, and how many it changes at most (Limit; 0: the server's default, 1,000).
type BulkFilter struct {
	State   string `json:"state,omitempty"`
	Queue   string `json:"queue,omitempty"`
	JobType string `json:"jobtype,omitempty"`
	Q       string `json:"q,omitempty"`
	Failed  *bool  `json:"failed,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// BulkResult is what a bulk action did: Action ("retry", "kill", "cancel" or "delete"), the jobs
// Changed, and More: it stopped at its limit, so jobs may still match (repeat it to cover them).
type BulkResult struct {
	Action  string `json:"action"`
	Changed int    `json:"changed"`
	More    bool   `json:"more"`
}

// QueueDetail is a queue with its jobs counted per state (Counts; states with none are absent):
// Size is its available jobs, LatencySeconds the age of the oldest of them.
type QueueDetail struct {
	Name           string         `json:"name"`
	Size           int            `json:"size"`
	LatencySeconds float64        `json:"latency_seconds"`
	Paused         bool           `json:"paused"`
	Counts         map[string]int `json:"counts"`
}

// WorkerInfo is a worker process as its beats describe it: State is what the server asks of it
// (StateRunning, StateQuiet, StateTerminate), ReportedState what it last said it was doing, Busy
// the jobs it holds now. GoneAt is set once it stopped beating (listed with includeGone only).
type WorkerInfo struct {
	WID           string     `json:"wid"`
	Hostname      string     `json:"hostname"`
	PID           *int       `json:"pid"`
	Labels        []string   `json:"labels"`
	RSSKB         *int       `json:"rss_kb"`
	ReportedState *string    `json:"reported_state"`
	State         string     `json:"state"`
	StartedAt     time.Time  `json:"started_at"`
	LastBeatAt    time.Time  `json:"last_beat_at"`
	GoneAt        *time.Time `json:"gone_at"`
	Busy          int        `json:"busy"`
}

// HistoryDay is the jobs processed, failed and pushed on one UTC day (Day: "YYYY-MM-DD").
type HistoryDay struct {
	Day       string `json:"day"`
	Processed int    `json:"processed"`
	Failed    int    `json:"failed"`
	Pushed    int    `json:"pushed"`
}

// BatchFilter says which batches ListBatches lists (Unfinished: only those not finished) and
// the page: Cursor is a page's Next, Limit its size (server default 50, at most 500).
type BatchFilter struct {
	Cursor     string
	Limit      int
	Unfinished bool
}

// BatchPage is a page of ListBatches, newest first; Next (nil: the last page) asks for the next.
type BatchPage struct {
	Batches []BatchStatus `json:"batches"`
	Next    *string       `json:"next"`
}

// withQuery is path with the parameters that were given as its query.
func withQuery(path string, query url.Values) string {
	if len(query) == 0 {
		return path
	}
	return path + "?" + query.Encode()
}

// ListJobs reads a page of the jobs matching filter; pass its NextCursor as filter.Cursor for
// the next page.
func (c *Client) ListJobs(ctx context.Context, filter JobFilter) (JobPage, error) {
	query := url.Values{}
	for name, value := range map[string]string{"state": filter.State, "queue": filter.Queue,
		"jobtype": filter.JobType, "q": filter.Q, "order": filter.Order, "cursor": filter.Cursor} {
		if value != "" {
			query.Set(name, value)
		}
	}
	if filter.Failed != nil {
		query.Set("failed", strconv.FormatBool(*filter.Failed))
	}
	if filter.Limit != 0 {
		query.Set("limit", strconv.Itoa(filter.Limit))
	}
	var page JobPage
	if err := c.call(ctx, "GET", withQuery("/v1/jobs", query), nil, &page, 0); err != nil {
		return JobPage{}, err
	}
	if page.Jobs == nil {
		page.Jobs = []Job{}
	}
	return page, nil
}

// RetryJob runs a dead, expired, skipped or scheduled job now (it becomes available) and returns
// it as stored; a job in another state is refused with code job_state_conflict (409).
func (c *Client) RetryJob(ctx context.Context, jid string) (*Job, error) {
	return c.jobAction(ctx, jid, "retry")
}

// KillJob moves a scheduled, available, waiting or active job to dead (an active one's worker
// loses its lease) and returns it as stored; otherwise code job_state_conflict.
func (c *Client) KillJob(ctx context.Context, jid string) (*Job, error) {
	return c.jobAction(ctx, jid, "kill")
}

// CancelJob cancels a scheduled, available, waiting or active job (it will not run again) and
// returns it as stored; otherwise code job_state_conflict.
func (c *Client) CancelJob(ctx context.Context, jid string) (*Job, error) {
	return c.jobAction(ctx, jid, "cancel")
}

func (c *Client) jobAction(ctx context.Context, jid, action string) (*Job, error) {
	var job Job
	path := "/v1/jobs/" + url.PathEscape(jid) + "/" + action
	return &job, c.callWith(ctx, "POST", path, nil, nil, &job, 0, false)
}

// DeleteJob deletes the job, in any state; ErrJobNotFound when there is none.
func (c *Client) DeleteJob(ctx context.Context, jid string) error {
	return c.callWith(ctx, "DELETE", "/v1/jobs/"+url.PathEscape(jid), nil, nil, nil, 0, false)
}

// RetryJobs is RetryJob on every job filter matches, at most filter.Limit of them.
func (c *Client) RetryJobs(ctx context.Context, filter BulkFilter) (BulkResult, error) {
	return c.bulk(ctx, "retry", filter)
}

// KillJobs is KillJob on every job filter matches, at most filter.Limit of them.
func (c *Client) KillJobs(ctx context.Context, filter BulkFilter) (BulkResult, error) {
	return c.bulk(ctx, "kill", filter)
}

// CancelJobs is CancelJob on every job filter matches, at most filter.Limit of them.
func (c *Client) CancelJobs(ctx context.Context, filter BulkFilter) (BulkResult, error) {
	return c.bulk(ctx, "cancel", filter)
}

// DeleteJobs deletes every job filter matches, at most filter.Limit of them.
func (c *Client) DeleteJobs(ctx context.Context, filter BulkFilter) (BulkResult, error) {
	return c.bulk(ctx, "delete", filter)
}

func (c *Client) bulk(ctx context.Context, action string, filter BulkFilter) (BulkResult, error) {
	var out BulkResult
	return out, c.callWith(ctx, "POST", "/v1/jobs/"+action, nil, filter, &out, 0, false)
}

// ListQueues lists every queue that has jobs (or was paused or resumed once).
func (c *Client) ListQueues(ctx context.Context) ([]QueueDetail, error) {
	var out struct {
		Queues []QueueDetail `json:"queues"`
	}
	if err := c.call(ctx, "GET", "/v1/queues", nil, &out, 0); err != nil {
		return nil, err
	}
	if out.Queues == nil {
		out.Queues = []QueueDetail{}
	}
	return out.Queues, nil
}

// Queue reads one queue (a name never seen reads as empty).
func (c *Client) Queue(ctx context.Context, name string) (QueueDetail, error) {
	var out QueueDetail
	return out, c.call(ctx, "GET", "/v1/queues/"+url.PathEscape(name), nil, &out, 0)
}

// PauseQueue stops handing out the queue's jobs (pushes are still accepted).
func (c *Client) PauseQueue(ctx context.Context, name string) (QueueDetail, error) {
	var out QueueDetail
	return out, c.call(ctx, "POST", "/v1/queues/"+url.PathEscape(name)+"/pause", nil, &out, 0)
}

// ResumeQueue hands out the queue's jobs again.
func (c *Client) ResumeQueue(ctx context.Context, name string) (QueueDetail, error) {
	var out QueueDetail
	return out, c.call(ctx, "POST", "/v1/queues/"+url.PathEscape(name)+"/resume", nil, &out, 0)
}

// ClearQueue deletes the queue's available jobs (active, scheduled and dead ones stay) and
// returns how many it deleted.
func (c *Client) ClearQueue(ctx context.Context, name string) (int, error) {
	var out struct {
		Deleted int `json:"deleted"`
	}
	return out.Deleted, c.callWith(ctx, "DELETE", "/v1/queues/"+url.PathEscape(name)+"/jobs", nil, nil, &out, 0, false)
}

// ListWorkers lists the live worker processes; with includeGone, also those the server declared
// gone (they stopped beating).
func (c *Client) ListWorkers(ctx context.Context, includeGone bool) ([]WorkerInfo, error) {
	path := "/v1/workers"
	if includeGone {
		path += "?include_gone=true"
	}
	var out struct {
		Workers []WorkerInfo `json:"workers"`
	}
	if err := c.call(ctx, "GET", path, nil, &out, 0); err != nil {
		return nil, err
	}
	if out.Workers == nil {
		out.Workers = []WorkerInfo{}
	}
	return out.Workers, nil
}

// QuietWorker asks the worker to fetch no more jobs (it finishes those it holds; its next beat
// tells it) and returns its state: a state only moves forward, so a terminating worker stays
// StateTerminate. A wid no live worker has is refused with code worker_not_found (404).
func (c *Client) QuietWorker(ctx context.Context, wid string) (string, error) {
	return c.signal(ctx, "/v1/workers/"+url.PathEscape(wid)+"/quiet")
}

// TerminateWorker asks the worker to stop (its next beat tells it) and returns its state; code
// worker_not_found as QuietWorker.
func (c *Client) TerminateWorker(ctx context.Context, wid string) (string, error) {
	return c.signal(ctx, "/v1/workers/"+url.PathEscape(wid)+"/terminate")
}

func (c *Client) signal(ctx context.Context, path string) (string, error) {
	var out struct {
		State string `json:"state"`
	}
	return out.State, c.call(ctx, "POST", path, nil, &out, 0)
}

// QuietWorkers is QuietWorker for every live worker of the server; it returns how many changed
// state (those quiet or terminating already did not).
func (c *Client) QuietWorkers(ctx context.Context) (int, error) {
	return c.signalAll(ctx, "/v1/workers/quiet")
}

// TerminateWorkers is TerminateWorker for every live worker of the server; it returns how many
// changed state.
func (c *Client) TerminateWorkers(ctx context.Context) (int, error) {
	return c.signalAll(ctx, "/v1/workers/terminate")
}

func (c *Client) signalAll(ctx context.Context, path string) (int, error) {
	var out struct {
		Changed int `json:"changed"`
	}
	return out.Changed, c.call(ctx, "POST", path, nil, &out, 0)
}

// History reads the jobs processed, failed and pushed per UTC day, oldest first, over the last
// days days (0: the server's default, 30), of one queue ("": all of them).
func (c *Client) History(ctx context.Context, days int, queue string) ([]HistoryDay, error) {
	query := url.Values{}
	if days != 0 {
		query.Set("days", strconv.Itoa(days))
	}
	if queue != "" {
		query.Set("queue", queue)
	}
	var out struct {
		Days []HistoryDay `json:"days"`
	}
	if err := c.call(ctx, "GET", withQuery("/v1/history", query), nil, &out, 0); err != nil {
		return nil, err
	}
	if out.Days == nil {
		out.Days = []HistoryDay{}
	}
	return out.Days, nil
}

// ListBatches reads a page of the batches, newest first; pass its Next as filter.Cursor for the
// next page.
func (c *Client) ListBatches(ctx context.Context, filter BatchFilter) (BatchPage, error) {
	query := url.Values{}
	if filter.Cursor != "" {
		query.Set("cursor", filter.Cursor)
	}
	if filter.Limit != 0 {
		query.Set("limit", strconv.Itoa(filter.Limit))
	}
	if filter.Unfinished {
		query.Set("unfinished", "true")
	}
	var page BatchPage
	if err := c.call(ctx, "GET", withQuery("/v1/batches", query), nil, &page, 0); err != nil {
		return BatchPage{}, err
	}
	if page.Batches == nil {
		page.Batches = []BatchStatus{}
	}
	return page, nil
}
