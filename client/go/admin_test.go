package werk

// The admin API beyond what the contract scenario covers: the requests each method sends, which
// of them are sent again after a lost answer, and against the server paging, clearing, bulk
// limits and signalling every worker.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestAdminRequestsNameOnlyTheFiltersGiven(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.RequestURI+" "+string(body))
		mu.Unlock()
		if r.Method == "DELETE" && r.URL.Path == "/v1/jobs/a%2Fb" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jid":"a/b","state":"quiet","queue":"q","deleted":4,"changed":2,"action":"kill",` +
			`"more":true,"jobs":[],"next_cursor":null,"queues":[],"workers":[],"days":[],"batches":[],"next":"n"}`))
	}))
	defer srv.Close()
	c := NewClient(srv.URL)
	ctx := context.Background()
	no, yes := false, true
	calls := []struct {
		call func() error
		want string
	}{
		{func() error { _, err := c.ListJobs(ctx, JobFilter{}); return err }, "GET /v1/jobs "},
		{func() error {
			_, err := c.ListJobs(ctx, JobFilter{State: "dead", Queue: "q", JobType: "t", Q: "two words",
				Failed: &no, Order: "oldest", Cursor: "c_1", Limit: 5})
			return err
		}, "GET /v1/jobs?cursor=c_1&failed=false&jobtype=t&limit=5&order=oldest&q=two+words&queue=q&state=dead "},
		{func() error { _, err := c.ListJobs(ctx, JobFilter{Failed: &yes}); return err }, "GET /v1/jobs?failed=true "},
		{func() error { _, err := c.RetryJob(ctx, "a/b"); return err }, "POST /v1/jobs/a%2Fb/retry "},
		{func() error { _, err := c.KillJob(ctx, "a/b"); return err }, "POST /v1/jobs/a%2Fb/kill "},
		{func() error { _, err := c.CancelJob(ctx, "a/b"); return err }, "POST /v1/jobs/a%2Fb/cancel "},
		{func() error { return c.DeleteJob(ctx, "a/b") }, "DELETE /v1/jobs/a%2Fb "},
		{func() error { _, err := c.RetryJobs(ctx, BulkFilter{}); return err }, "POST /v1/jobs/retry {}"},
		{func() error { _, err := c.KillJobs(ctx, BulkFilter{Queue: "q", Failed: &no, Limit: 3}); return err },
			`POST /v1/jobs/kill {"queue":"q","failed":false,"limit":3}`},
		{func() error { _, err := c.CancelJobs(ctx, BulkFilter{State: "available", JobType: "t"}); return err },
			`POST /v1/jobs/cancel {"state":"available","jobtype":"t"}`},
		{func() error { _, err := c.DeleteJobs(ctx, BulkFilter{Q: "x"}); return err }, `POST /v1/jobs/delete {"q":"x"}`},
		{func() error { _, err := c.ListQueues(ctx); return err }, "GET /v1/queues "},
		{func() error { _, err := c.Queue(ctx, "q.1"); return err }, "GET /v1/queues/q.1 "},
		{func() error { _, err := c.PauseQueue(ctx, "q"); return err }, "POST /v1/queues/q/pause "},
		{func() error { _, err := c.ResumeQueue(ctx, "q"); return err }, "POST /v1/queues/q/resume "},
		{func() error { _, err := c.ClearQueue(ctx, "q"); return err }, "DELETE /v1/queues/q/jobs "},
		{func() error { _, err := c.ListWorkers(ctx, false); return err }, "GET /v1/workers "},
		{func() error { _, err := c.ListWorkers(ctx, true); return err }, "GET /v1/workers?include_gone=true "},
		{func() error { _, err := c.QuietWorker(ctx, "host/1 2"); return err }, "POST /v1/workers/host%2F1%202/quiet "},
		{func() error { _, err := c.TerminateWorker(ctx, "w"); return err }, "POST /v1/workers/w/terminate "},
		{func() error { _, err := c.QuietWorkers(ctx); return err }, "POST /v1/workers/quiet "},
		{func() error { _, err := c.TerminateWorkers(ctx); return err }, "POST /v1/workers/terminate "},
		{func() error { _, err := c.History(ctx, 0, ""); return err }, "GET /v1/history "},
		{func() error { _, err := c.History(ctx, 7, "q"); return err }, "GET /v1/history?days=7&queue=q "},
		{func() error { _, err := c.ListBatches(ctx, BatchFilter{}); return err }, "GET /v1/batches "},
		{func() error {
			_, err := c.ListBatches(ctx, BatchFilter{Cursor: "b", Limit: 2, Unfinished: true})
			return err
		},
			"GET /v1/batches?cursor=b&limit=2&unfinished=true "},
	}
	for i, call := range calls {
		if err := call.call(); err != nil {
			t.Fatalf("call %d (%s): %v", i, call.want, err)
		}
		mu.Lock()
		last := got[len(got)-1]
		mu.Unlock()
		if last != call.want {
			t.Errorf("call %d sent %q, want %q", i, last, call.want)
		}
	}
	// The answers unwrapped: the number, the state, the lists (never nil), the page's cursor.
	if n, _ := c.ClearQueue(ctx, "q"); n != 4 {
		t.Errorf("ClearQueue = %d, want 4", n)
	}
	if n, _ := c.TerminateWorkers(ctx); n != 2 {
		t.Errorf("TerminateWorkers = %d, want 2", n)
	}
	if s, _ := c.QuietWorker(ctx, "w"); s != StateQuiet {
		t.Errorf("QuietWorker = %q", s)
	}
	if r, _ := c.KillJobs(ctx, BulkFilter{}); r != (BulkResult{Action: "kill", Changed: 2, More: true}) {
		t.Errorf("KillJobs = %+v", r)
	}
	queues, _ := c.ListQueues(ctx)
	workers, _ := c.ListWorkers(ctx, false)
	days, _ := c.History(ctx, 0, "")
	page, _ := c.ListJobs(ctx, JobFilter{})
	batches, _ := c.ListBatches(ctx, BatchFilter{})
	if queues == nil || workers == nil || days == nil || page.Jobs == nil || page.NextCursor != nil ||
		batches.Batches == nil || batches.Next == nil || *batches.Next != "n" {
		t.Errorf("answers %#v %#v %#v %+v %+v", queues, workers, days, page, batches)
	}
}

// A server that reads each request and hangs up without answering: whatever changes jobs or
// deletes them may have been done, so it is sent once; reads, pausing and signalling workers are
// the same done twice, and are sent again.
func TestAdminActionsAreNotSentAgainAfterALostAnswer(t *testing.T) {
	url, requests := hangingUp(t)
	c := NewClient(url)
	c.Retries = 2
	ctx := context.Background()
	for _, call := range []struct {
		name  string
		call  func() error
		times int32
	}{
		{"RetryJob", func() error { _, err := c.RetryJob(ctx, "j"); return err }, 1},
		{"KillJob", func() error { _, err := c.KillJob(ctx, "j"); return err }, 1},
		{"CancelJob", func() error { _, err := c.CancelJob(ctx, "j"); return err }, 1},
		{"DeleteJob", func() error { return c.DeleteJob(ctx, "j") }, 1},
		{"RetryJobs", func() error { _, err := c.RetryJobs(ctx, BulkFilter{}); return err }, 1},
		{"KillJobs", func() error { _, err := c.KillJobs(ctx, BulkFilter{}); return err }, 1},
		{"CancelJobs", func() error { _, err := c.CancelJobs(ctx, BulkFilter{}); return err }, 1},
		{"DeleteJobs", func() error { _, err := c.DeleteJobs(ctx, BulkFilter{}); return err }, 1},
		{"ClearQueue", func() error { _, err := c.ClearQueue(ctx, "q"); return err }, 1},
		{"ListJobs", func() error { _, err := c.ListJobs(ctx, JobFilter{}); return err }, 3},
		{"PauseQueue", func() error { _, err := c.PauseQueue(ctx, "q"); return err }, 3},
		{"QuietWorker", func() error { _, err := c.QuietWorker(ctx, "w"); return err }, 3},
		{"TerminateWorkers", func() error { _, err := c.TerminateWorkers(ctx); return err }, 3},
	} {
		before := requests.Load()
		if err := call.call(); err == nil {
			t.Fatalf("%s: no error without an answer", call.name)
		}
		if n := requests.Load() - before; n != call.times {
			t.Errorf("%s sent %d times, want %d", call.name, n, call.times)
		}
	}
}

func pushAll(t *testing.T, c *Client, specs ...JobSpec) []string {
	t.Helper()
	jids := make([]string, len(specs))
	for i, spec := range specs {
		job, err := c.Push(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		jids[i] = job.JID
	}
	return jids
}

func TestListJobsPagesWithLimitAndNextCursor(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-adm")
	specs := make([]JobSpec, 5)
	for i := range specs {
		specs[i] = JobSpec{JobType: "page", Queue: queue, Args: []any{i}}
	}
	jids := pushAll(t, c, specs...)
	var listed []string
	filter := JobFilter{Queue: queue, Order: "oldest", Limit: 2}
	for pages := 1; ; pages++ {
		page, err := c.ListJobs(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		if pages < 3 && (len(page.Jobs) != 2 || page.NextCursor == nil) || pages == 3 && len(page.Jobs) != 1 {
			t.Fatalf("page %d: %d jobs, next %v", pages, len(page.Jobs), page.NextCursor)
		}
		for _, job := range page.Jobs {
			listed = append(listed, job.JID)
		}
		if page.NextCursor == nil {
			break
		}
		if pages == 3 {
			t.Fatalf("a next cursor after the last job")
		}
		filter.Cursor = *page.NextCursor
	}
	if len(listed) != len(jids) {
		t.Fatalf("listed %v, pushed %v", listed, jids)
	}
	for i := range jids {
		if listed[i] != jids[i] {
			t.Fatalf("oldest first listed %v, pushed %v", listed, jids)
		}
	}
	never, once := false, true
	for failed, want := range map[*bool]int{&never: 5, &once: 0} {
		page, err := c.ListJobs(ctx, JobFilter{Queue: queue, Failed: failed})
		if err != nil || len(page.Jobs) != want {
			t.Fatalf("failed=%v: %d jobs (%v), want %d", *failed, len(page.Jobs), err, want)
		}
	}
}

func TestClearQueueCountsTheAvailableJobsItDeleted(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-adm")
	later := At(time.Now().Add(time.Hour))
	pushAll(t, c, JobSpec{JobType: "t", Queue: queue}, JobSpec{JobType: "t", Queue: queue},
		JobSpec{JobType: "t", Queue: queue}, JobSpec{JobType: "t", Queue: queue, At: later})
	deleted, err := c.ClearQueue(ctx, queue)
	if err != nil || deleted != 3 {
		t.Fatalf("ClearQueue = %d, %v; want 3", deleted, err)
	}
	detail, err := c.Queue(ctx, queue)
	if err != nil || detail.Size != 0 || len(detail.Counts) != 1 || detail.Counts["scheduled"] != 1 {
		t.Fatalf("after clearing: %+v %v", detail, err)
	}
	if deleted, err := c.ClearQueue(ctx, queue); err != nil || deleted != 0 {
		t.Fatalf("clearing again = %d, %v; want 0", deleted, err)
	}
}

func TestBulkActionStopsAtItsLimitAndSaysMore(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-adm")
	later := At(time.Now().Add(time.Hour))
	pushAll(t, c, JobSpec{JobType: "t", Queue: queue, At: later}, JobSpec{JobType: "t", Queue: queue, At: later},
		JobSpec{JobType: "t", Queue: queue, At: later})
	filter := BulkFilter{Queue: queue, State: "scheduled", Limit: 2}
	first, err := c.KillJobs(ctx, filter)
	if err != nil || first != (BulkResult{Action: "kill", Changed: 2, More: true}) {
		t.Fatalf("first KillJobs = %+v, %v", first, err)
	}
	second, err := c.KillJobs(ctx, filter)
	if err != nil || second != (BulkResult{Action: "kill", Changed: 1, More: false}) {
		t.Fatalf("second KillJobs = %+v, %v", second, err)
	}
	page, err := c.ListJobs(ctx, JobFilter{Queue: queue, State: "dead"})
	if err != nil || len(page.Jobs) != 3 {
		t.Fatalf("dead after killing: %d jobs, %v", len(page.Jobs), err)
	}
	deleted, err := c.DeleteJobs(ctx, BulkFilter{Queue: queue})
	if err != nil || deleted != (BulkResult{Action: "delete", Changed: 3, More: false}) {
		t.Fatalf("DeleteJobs = %+v, %v", deleted, err)
	}
}

func TestListWorkersIncludeGone(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	wid := "go-adm-" + NewJID()
	if _, err := c.Beat(ctx, Beat{WID: wid, Hostname: "h", PID: 7, Labels: []string{"admin"}, CurrentState: StateQuiet}); err != nil {
		t.Fatal(err)
	}
	live, err := c.ListWorkers(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	all, err := c.ListWorkers(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	// A worker is declared gone only after a minute without beats, so a test cannot make one:
	// the live list must hold none (those of earlier tests may be gone), and the list with the
	// gone ones every live one.
	listed := map[string]WorkerInfo{}
	for _, w := range all {
		listed[w.WID] = w
	}
	for _, w := range live {
		if w.GoneAt != nil {
			t.Fatalf("a gone worker listed as live: %+v", w)
		}
		if _, ok := listed[w.WID]; !ok {
			t.Fatalf("live worker %s missing from the list with the gone ones", w.WID)
		}
	}
	mine, ok := listed[wid]
	if !ok || mine.Hostname != "h" || mine.PID == nil || *mine.PID != 7 || len(mine.Labels) != 1 ||
		mine.ReportedState == nil || *mine.ReportedState != StateQuiet || mine.State != StateRunning ||
		mine.GoneAt != nil || mine.Busy != 0 || mine.StartedAt.IsZero() || mine.LastBeatAt.Before(mine.StartedAt) {
		data, _ := json.Marshal(mine)
		t.Fatalf("own worker %s listed as %s", wid, data)
	}
}

// QuietWorkers and TerminateWorkers act on every live worker of the server: only this test's own
// workers are checked, and the count is at least theirs.
func TestQuietAndTerminateEveryLiveWorker(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	wids := []string{"go-adm-" + NewJID(), "go-adm-" + NewJID()}
	stateOf := func(wid string) string {
		t.Helper()
		state, err := c.Beat(ctx, Beat{WID: wid, Hostname: "h"})
		if err != nil {
			t.Fatal(err)
		}
		return state
	}
	for _, wid := range wids {
		if s := stateOf(wid); s != StateRunning {
			t.Fatalf("%s starts %q", wid, s)
		}
	}
	changed, err := c.QuietWorkers(ctx)
	if err != nil || changed < len(wids) {
		t.Fatalf("QuietWorkers = %d, %v; want at least %d", changed, err, len(wids))
	}
	for _, wid := range wids {
		if s := stateOf(wid); s != StateQuiet {
			t.Fatalf("%s is %q after QuietWorkers", wid, s)
		}
	}
	changed, err = c.TerminateWorkers(ctx)
	if err != nil || changed < len(wids) {
		t.Fatalf("TerminateWorkers = %d, %v; want at least %d", changed, err, len(wids))
	}
	for _, wid := range wids {
		if s := stateOf(wid); s != StateTerminate {
			t.Fatalf("%s is %q after TerminateWorkers", wid, s)
		}
	}
	// A state only moves forward: quieting a terminating worker leaves it terminating.
	if _, err := c.QuietWorkers(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := c.QuietWorker(ctx, wids[0]); err != nil || s != StateTerminate {
		t.Fatalf("QuietWorker on a terminating worker = %q, %v", s, err)
	}
	if s := stateOf(wids[1]); s != StateTerminate {
		t.Fatalf("%s is %q after quieting every worker again", wids[1], s)
	}
}
