package werk

import (
	"encoding/json"
	"fmt"
	"time"
)

// Job is a job as the server returns it. Lease is set on fetched jobs only (no read of a job
// shows it); Created on the answer to Push (false: the jid existed, nothing new was stored).
// Nullable fields are pointers.
type Job struct {
	JID            string          `json:"jid"`
	JobType        string          `json:"jobtype"`
	Args           []any           `json:"args"`
	Queue          string          `json:"queue"`
	Priority       int             `json:"priority"`
	ReserveFor     int             `json:"reserve_for"`
	Retry          int             `json:"retry"`
	Backtrace      int             `json:"backtrace"`
	Custom         map[string]any  `json:"custom"`
	At             *time.Time      `json:"at"`
	State          string          `json:"state"`
	CreatedAt      time.Time       `json:"created_at"`
	EnqueuedAt     *time.Time      `json:"enqueued_at"`
	Attempt        int             `json:"attempt"`
	Progress       json.RawMessage `json:"progress"`
	Failure        *Failure        `json:"failure"`
	Lease          *string         `json:"lease"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"`
	WID            *string         `json:"wid"`
	Created        *bool           `json:"created,omitempty"`
	ExpiresAt      *time.Time      `json:"expires_at"`
	Unique         *Unique         `json:"unique"`
	// Duplicate: another job held the unique key; this is that job.
	Duplicate bool `json:"duplicate,omitempty"`
	// KeepResultFor: seconds the job stays readable as completed after its ack (0: deleted).
	KeepResultFor int             `json:"keep_result_for"`
	Result        json.RawMessage `json:"result"`
	CompletedAt   *time.Time      `json:"completed_at"`
	// Dependencies: a job pushed with DependsOn, as fetched or read alone, with each
	// dependency's outcome and result (see Dependency.ResultOmitted). DependenciesOmitted: the
	// answer listed only the first of them, one answer listing at most the server's
	// WERK_MAX_DEPENDENCIES_LISTED (a Worker reads the rest before its handler runs,
	// Client.Dependencies reads them all). Dependents: a job read alone that others depend on.
	Dependencies        []Dependency `json:"dependencies,omitempty"`
	DependenciesOmitted bool         `json:"dependencies_omitted,omitempty"`
	Dependents          []Dependent  `json:"dependents,omitempty"`
	// Batch: the bid of the batch the job is a member of (empty: none).
	Batch string `json:"batch,omitempty"`

	result any // set by a handler (SetResult): sent with the worker's ack
}

// SetResult records what the job produced; the Worker sends it with the ack (stored with a job
// pushed with KeepResultFor). It must marshal to JSON.
func (j *Job) SetResult(v any) { j.result = v }

// JobResult is where a job stands for whoever waits for its result (Client.Result). Done is true
// once the job is settled: State then says how (completed, with Result; dead, expired or
// cancelled, with Failure if it failed). False: the wait ended first.
type JobResult struct {
	JID         string          `json:"jid"`
	State       string          `json:"state"`
	Done        bool            `json:"done"`
	Result      json.RawMessage `json:"result"`
	CompletedAt *time.Time      `json:"completed_at"`
	Failure     *Failure        `json:"failure"`
}

// Unique is a push's unique lock: no other job with the same key is stored while one holds it.
// Key names the lock (empty: a hash of jobtype, queue and args, or of the By paths such as
// "args.0" or "custom.tenant"); For bounds it in seconds (from At for a scheduled job); Until is
// "success" (held until acked, dead or expired) or "start" (until a worker takes the job);
// OnConflict is "reject" (ErrNotUnique, naming the holder in ExistingJID), "existing" (the
// holder is answered, Duplicate true) or "replace" (a waiting holder takes this push's args
// and at).
type Unique struct {
	For        float64  `json:"for,omitempty"`
	Until      string   `json:"until,omitempty"`
	Key        string   `json:"key,omitempty"`
	By         []string `json:"by,omitempty"`
	OnConflict string   `json:"on_conflict,omitempty"`
}

// UniqueConflict is a batch item whose unique key another job held: its place in the batch,
// the holder (the item's jid in the answer) and what was done.
type UniqueConflict struct {
	Index       int    `json:"index"`
	ExistingJID string `json:"existing_jid"`
	OnConflict  string `json:"on_conflict"`
}

// Dependency is one dependency of a job: Outcome is nil until it settles, then "completed"
// (with its Result), "dead", "expired", "cancelled", "skipped" or "deleted". ResultOmitted: the
// answer that carried it (a fetch, Get) left its result out, the dependencies' results of one
// answer being bounded (WERK_MAX_DEPENDENCY_RESULTS_BYTES); Client.Dependencies reads them all,
// and the Worker fills them in before a handler runs.
type Dependency struct {
	JID           string          `json:"jid"`
	Ref           *string         `json:"ref"`
	OnFailure     string          `json:"on_failure"`
	Outcome       *string         `json:"outcome"`
	Result        json.RawMessage `json:"result"`
	ResultOmitted bool            `json:"result_omitted,omitempty"`
	SettledAt     *time.Time      `json:"settled_at"`
}

// Dependent is a job depending on the one read.
type Dependent struct {
	JID       string `json:"jid"`
	State     string `json:"state"`
	OnFailure string `json:"on_failure"`
}

// Needs is an entry of JobSpec.DependsOn with its own policy ("fail", "skip" or "ignore").
type Needs struct {
	Job       string `json:"job"`
	OnFailure string `json:"on_failure,omitempty"`
}

// DependencyResult decodes the result of the completed dependency named by jid or ref into v;
// false when the job has no such completed dependency.
func (j *Job) DependencyResult(name string, v any) (bool, error) {
	for _, d := range j.Dependencies {
		if d.JID == name || (d.Ref != nil && *d.Ref == name) {
			if d.Outcome == nil || *d.Outcome != "completed" {
				return false, nil
			}
			if d.ResultOmitted {
				// Decoding the null left in its place would answer nothing with no error.
				return true, fmt.Errorf("werk: the result of dependency %s was left out of the answer "+
					"that read the job (Client.Dependencies reads it)", d.JID)
			}
			return true, json.Unmarshal(d.Result, v)
		}
	}
	return false, nil
}

// LeaseToken is the job's current lease ("" when it is not active).
func (j *Job) LeaseToken() string {
	if j.Lease == nil {
		return ""
	}
	return *j.Lease
}

// Failure is the last failure of a job.
type Failure struct {
	RetryCount int        `json:"retry_count"`
	Remaining  int        `json:"remaining"`
	FailedAt   time.Time  `json:"failed_at"`
	NextAt     *time.Time `json:"next_at"`
	ErrType    string     `json:"errtype"`
	Message    string     `json:"message"`
	Backtrace  []string   `json:"backtrace"`
}

// JobSpec is what a producer sends. Only JobType is required; zero values take the server's
// defaults (queue "default", reserve_for 1800, retry 25). Retry is a pointer because 0 (discard
// on failure) differs from the default: use werk.Int(0).
type JobSpec struct {
	JID        string         `json:"jid,omitempty"`
	JobType    string         `json:"jobtype"`
	Args       []any          `json:"args,omitempty"`
	Queue      string         `json:"queue,omitempty"`
	Priority   int            `json:"priority,omitempty"`
	ReserveFor int            `json:"reserve_for,omitempty"`
	Retry      *int           `json:"retry,omitempty"`
	Backtrace  int            `json:"backtrace,omitempty"`
	Custom     map[string]any `json:"custom,omitempty"`
	// At: run no earlier than this RFC 3339 time with a zone (see werk.At).
	At     string  `json:"at,omitempty"`
	Unique *Unique `json:"unique,omitempty"`
	// ExpiresAt (RFC 3339, see werk.At) or ExpiresIn (seconds from At or now): a job not
	// started by then is never run; it becomes "expired".
	ExpiresAt string  `json:"expires_at,omitempty"`
	ExpiresIn float64 `json:"expires_in,omitempty"`
	// KeepResultFor: seconds the job stays readable as completed after its ack, with its result.
	KeepResultFor int `json:"keep_result_for,omitempty"`
	// DependsOn: jobs this one waits for until each is settled: refs of the same request or
	// jids of stored jobs (strings), or Needs with a policy of their own. OnDependencyFailure:
	// "fail" (default), "skip" or "ignore". Ref: the job's name in its request.
	DependsOn           []any  `json:"depends_on,omitempty"`
	OnDependencyFailure string `json:"on_dependency_failure,omitempty"`
	Ref                 string `json:"ref,omitempty"`
	// Batch: the bid of an open batch the job joins (see Client.Batch).
	Batch string `json:"batch,omitempty"`
}

// BatchNew opens a batch: a description, a parent batch it is a member of, and callback jobs
// run once: OnComplete when every member has settled, OnSuccess when every member has
// completed, OnDeath at the first member that ends without completing.
type BatchNew struct {
	Description string   `json:"description,omitempty"`
	Parent      string   `json:"parent,omitempty"`
	OnComplete  *JobSpec `json:"on_complete,omitempty"`
	OnSuccess   *JobSpec `json:"on_success,omitempty"`
	OnDeath     *JobSpec `json:"on_death,omitempty"`
}

// BatchCallback is a batch's callback job: State is "waiting" until its condition is met, and
// empty once the job is no longer stored.
type BatchCallback struct {
	JID   string `json:"jid"`
	State string `json:"state"`
}

// BatchStatus is how a batch stands. State: "open", "committed" or "finished". Members (jobs
// and child batches) are Succeeded (completed), Dead (ended without completing; a retried one is
// pending again) or Pending. CommittedAt is nil while the batch is open (opened again, it is
// cleared until the next commit).
type BatchStatus struct {
	BID         string         `json:"bid"`
	Description string         `json:"description"`
	Parent      string         `json:"parent"`
	Children    []string       `json:"children"`
	State       string         `json:"state"`
	Total       int            `json:"total"`
	Pending     int            `json:"pending"`
	Succeeded   int            `json:"succeeded"`
	Dead        int            `json:"dead"`
	CreatedAt   time.Time      `json:"created_at"`
	CommittedAt *time.Time     `json:"committed_at"`
	CompletedAt *time.Time     `json:"completed_at"`
	SucceededAt *time.Time     `json:"succeeded_at"`
	DiedAt      *time.Time     `json:"died_at"`
	OnComplete  *BatchCallback `json:"on_complete"`
	OnSuccess   *BatchCallback `json:"on_success"`
	OnDeath     *BatchCallback `json:"on_death"`
}

// Int returns a pointer to v (for JobSpec.Retry).
func Int(v int) *int { return &v }

// Seconds returns d in seconds, fractions kept, as FailReport.RetryIn takes it.
func Seconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}

// At formats t for JobSpec.At.
func At(t time.Time) string { return t.Format(time.RFC3339Nano) }

// PushManyResult lists the stored jobs (in input order) and how many were new, their jids (in
// input order) and the jids that were stored already (nothing new stored for them).
// Items whose unique key another job held are answered by that job and listed in Conflicts.
type PushManyResult struct {
	Jobs      []Job            `json:"jobs"`
	Created   int              `json:"created"`
	JIDs      []string         `json:"jids"`
	Existed   []string         `json:"existed"`
	Conflicts []UniqueConflict `json:"conflicts,omitempty"`
	// Refs maps each item's Ref to its jid.
	Refs map[string]string `json:"refs,omitempty"`
}

// PushJIDsResult is the short answer to a batch push: every jid (in input order), how many were
// new, and the jids that were stored already.
type PushJIDsResult struct {
	JIDs      []string         `json:"jids"`
	Created   int              `json:"created"`
	Existed   []string         `json:"existed"`
	Conflicts []UniqueConflict `json:"conflicts,omitempty"`
	// Refs maps each item's Ref to its jid.
	Refs map[string]string `json:"refs,omitempty"`
}

// FetchRequest asks for up to Count jobs (1..100; 0 means 1) from Queues, tried in order,
// long-polling up to Wait seconds (0..30).
type FetchRequest struct {
	Queues []string `json:"queues"`
	WID    string   `json:"wid"`
	Count  int      `json:"count,omitempty"`
	Wait   float64  `json:"wait"`
}

// AckItem is one (jid, lease) pair for AckMany, with an optional Result (nil: none).
type AckItem struct {
	JID    string `json:"jid"`
	Lease  string `json:"lease"`
	Result any    `json:"result,omitempty"`
}

// AckManyResult: acked jobs, and jobs whose lease was not current (not acked).
type AckManyResult struct {
	Acked     []string `json:"acked"`
	LeaseLost []string `json:"lease_lost"`
}

// FailReport describes a failed attempt. RetryIn (seconds, fractions kept: see Seconds)
// overrides the backoff, 0 retrying at once; Retry false kills it.
type FailReport struct {
	ErrType   string   `json:"errtype,omitempty"`
	Message   string   `json:"message,omitempty"`
	Backtrace []string `json:"backtrace,omitempty"`
	RetryIn   *float64 `json:"retry_in,omitempty"`
	Retry     *bool    `json:"retry,omitempty"`
}

// FailResult: the job's state after the failure (scheduled, dead or discarded).
type FailResult struct {
	JID    string     `json:"jid"`
	State  string     `json:"state"`
	NextAt *time.Time `json:"next_at"`
}

// ExtendOptions: a new reservation in seconds (0: the job's own) and an optional checkpoint.
type ExtendOptions struct {
	ReserveFor int `json:"reserve_for,omitempty"`
	Progress   any `json:"progress,omitempty"`
}

// ExtendResult carries the lease's new expiry.
type ExtendResult struct {
	JID            string    `json:"jid"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// Beat is a worker process's heartbeat.
type Beat struct {
	WID          string   `json:"wid"`
	Hostname     string   `json:"hostname,omitempty"`
	PID          int      `json:"pid,omitempty"`
	Labels       []string `json:"labels,omitempty"`
	CurrentState string   `json:"current_state,omitempty"`
	RSSKB        int      `json:"rss_kb,omitempty"`
}

// Worker states a beat answers with.
const (
	StateRunning   = "running"
	StateQuiet     = "quiet"
	StateTerminate = "terminate"
)

// Info is the server summary (GET /v1/info).
type Info struct {
	Server struct {
		Version       string    `json:"version"`
		UptimeSeconds float64   `json:"uptime_seconds"`
		Now           time.Time `json:"now"`
	} `json:"server"`
	Totals struct {
		Processed int64 `json:"processed"`
		Failed    int64 `json:"failed"`
		Enqueued  int64 `json:"enqueued"`
	} `json:"totals"`
	States  map[string]int64 `json:"states"`
	Queues  []QueueInfo      `json:"queues"`
	Workers int              `json:"workers"`
}

// QueueInfo is one queue of Info.
type QueueInfo struct {
	Name           string  `json:"name"`
	Size           int64   `json:"size"`
	LatencySeconds float64 `json:"latency_seconds"`
	Paused         bool    `json:"paused"`
}
