package werk

// What the client makes of the server's answers, field by field and code by code, against the
// Python SDK's reading of them (client/python/src/werk_client: errors.py, models.py).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestResultTooLargeMatchesErrResultTooLargeAndErrTooLarge(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-big")
	if _, err := c.Push(ctx, JobSpec{JobType: "big", Queue: queue, KeepResultFor: 60}); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-big"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("fetch: %v %+v", err, jobs)
	}
	// Over the server's result limit (64 KiB), far under its body limit.
	err = c.AckResult(ctx, jobs[0].JID, jobs[0].LeaseToken(), strings.Repeat("x", 70_000))
	e, ok := AsError(err)
	if !ok || e.Code != "result_too_large" || e.Status != 413 {
		t.Fatalf("ack: %v", err)
	}
	if !errors.Is(err, ErrResultTooLarge) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("errors.Is: ErrResultTooLarge %v, ErrTooLarge %v", errors.Is(err, ErrResultTooLarge), errors.Is(err, ErrTooLarge))
	}
	if errors.Is(err, ErrValidation) || errors.Is(err, ErrServerError) {
		t.Fatalf("%v matches a sentinel of another code", err)
	}
	// Nothing was acked: the lease still holds.
	if err := c.Ack(ctx, jobs[0].JID, jobs[0].LeaseToken()); err != nil {
		t.Fatalf("ack after the refusal: %v", err)
	}
}

// Every code the server answers with (server/werk/errors.py, api/problems.py) against the
// sentinels, as the Python SDK maps them (errors.py _BY_CODE, _BY_STATUS).
func TestEveryServerCodeMatchesItsSentinel(t *testing.T) {
	sentinels := map[string]*Error{
		"ErrLeaseLost": ErrLeaseLost, "ErrNotUnique": ErrNotUnique, "ErrJobNotFound": ErrJobNotFound,
		"ErrBatchNotFound": ErrBatchNotFound, "ErrBatchClosed": ErrBatchClosed, "ErrValidation": ErrValidation,
		"ErrUnauthorized": ErrUnauthorized, "ErrForbidden": ErrForbidden, "ErrTooLarge": ErrTooLarge,
		"ErrResultTooLarge": ErrResultTooLarge, "ErrUnavailable": ErrUnavailable, "ErrServerError": ErrServerError,
	}
	cases := []struct {
		status int
		code   string
		want   []string // the sentinels it matches; none: a plain *Error with its code
	}{
		{500, "internal_error", []string{"ErrServerError"}},
		{422, "invalid_request", []string{"ErrValidation"}},
		{400, "invalid_json", []string{"ErrValidation"}},
		{422, "dependency_cycle", []string{"ErrValidation"}},
		{422, "dependency_not_found", []string{"ErrValidation"}},
		{409, "not_unique", []string{"ErrNotUnique"}},
		{404, "job_not_found", []string{"ErrJobNotFound"}},
		{409, "lease_lost", []string{"ErrLeaseLost"}},
		{413, "payload_too_large", []string{"ErrTooLarge"}},
		{413, "result_too_large", []string{"ErrResultTooLarge", "ErrTooLarge"}},
		{415, "unsupported_media_type", nil},
		{400, "malformed_request", []string{"ErrValidation"}},
		{431, "header_too_large", nil},
		{408, "request_timeout", nil},
		{503, "database_unavailable", []string{"ErrUnavailable"}},
		{500, "schema_too_new", []string{"ErrServerError"}},
		{401, "unauthorized", []string{"ErrUnauthorized"}},
		{403, "forbidden", []string{"ErrForbidden"}},
		{429, "too_many_auth_failures", []string{"ErrUnauthorized"}},
		{401, "ambiguous_credentials", []string{"ErrUnauthorized"}},
		{403, "cross_site_request", []string{"ErrForbidden"}},
		{421, "host_not_allowed", nil},
		{409, "job_state_conflict", nil},
		{404, "worker_not_found", nil},
		{404, "batch_not_found", []string{"ErrBatchNotFound"}},
		{409, "batch_committed", []string{"ErrBatchClosed"}},
		{409, "batch_finished", []string{"ErrBatchClosed"}},
		{400, "bad_request", nil},
		{404, "not_found", nil},
		{405, "method_not_allowed", nil},
		{502, "http_502", []string{"ErrUnavailable"}},
		{504, "http_504", []string{"ErrUnavailable"}},
		// Answers without a problem body, by their status (as Python and TypeScript read them).
		{400, "http_400", []string{"ErrValidation"}},
		{401, "http_401", []string{"ErrUnauthorized"}},
		{403, "http_403", []string{"ErrForbidden"}},
		{404, "http_404", []string{"ErrJobNotFound"}},
		{409, "http_409", []string{"ErrLeaseLost"}},
		{413, "http_413", []string{"ErrTooLarge"}},
		{422, "http_422", []string{"ErrValidation"}},
		{418, "http_418", nil},
	}
	for _, tc := range cases {
		err := error(&Error{Code: tc.code, Status: tc.status})
		var got []string
		for name, sentinel := range sentinels {
			if errors.Is(err, sentinel) {
				got = append(got, name)
			}
		}
		if !sameSet(got, tc.want) {
			t.Errorf("%d %s matches %v, want %v", tc.status, tc.code, got, tc.want)
		}
	}
}

func sameSet(a, b []string) bool {
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// A 500 the server answers (internal_error) arrives as ErrServerError, and so does any other
// 5xx but those that mean "try again" (ErrUnavailable).
func TestServerFailuresMatchErrServerError(t *testing.T) {
	answers := map[string]struct {
		status int
		body   string
	}{
		"/internal": {500, `{"type":"about:blank","title":"Internal server error","status":500,"detail":"logged","code":"internal_error"}`},
		"/proxy":    {500, `upstream failed`},
		"/busy":     {503, `{"code":"database_unavailable","detail":"retry"}`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[strings.TrimSuffix(r.URL.Path, "/v1/info")]
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	defer srv.Close()
	for path, server := range map[string]bool{"/internal": true, "/proxy": true, "/busy": false} {
		c := NewClient(srv.URL + path)
		c.Retries = 0
		_, err := c.Info(context.Background())
		if errors.Is(err, ErrServerError) != server || errors.Is(err, ErrUnavailable) == server {
			t.Errorf("%s: %v: ErrServerError %v, ErrUnavailable %v", path, err, errors.Is(err, ErrServerError), errors.Is(err, ErrUnavailable))
		}
	}
}

func TestPushManyAndPushJIDsCarryJIDsExistedAndRefs(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-ids")
	known := NewJID()
	if _, err := c.Push(ctx, JobSpec{JID: known, JobType: "t", Queue: queue}); err != nil {
		t.Fatal(err)
	}
	specs := []JobSpec{{JobType: "t", Queue: queue, Ref: "first"}, {JID: known, JobType: "t", Queue: queue, Ref: "known"}}
	many, err := c.PushMany(ctx, specs)
	if err != nil || len(many.JIDs) != 2 || many.JIDs[0] != many.Jobs[0].JID || many.JIDs[1] != known ||
		!reflect.DeepEqual(many.Existed, []string{known}) || many.Created != 1 ||
		!reflect.DeepEqual(many.Refs, map[string]string{"first": many.JIDs[0], "known": known}) {
		t.Fatalf("push many: %v %+v", err, many)
	}
	short, err := c.PushJIDs(ctx, []JobSpec{{JobType: "t", Queue: queue, Ref: "new"}, {JID: known, JobType: "t", Queue: queue, Ref: "known"}})
	if err != nil || len(short.JIDs) != 2 || short.JIDs[1] != known || !reflect.DeepEqual(short.Existed, []string{known}) ||
		!reflect.DeepEqual(short.Refs, map[string]string{"new": short.JIDs[0], "known": known}) {
		t.Fatalf("push jids: %v %+v", err, short)
	}
	flow, err := c.PushFlow(ctx, []JobSpec{{JobType: "a", Queue: queue, Ref: "a"}, {JobType: "b", Queue: queue, DependsOn: []any{"a"}}})
	if err != nil || len(flow.JIDs) != 2 || flow.JIDs[0] != flow.Refs["a"] || flow.Existed == nil || len(flow.Existed) != 0 {
		t.Fatalf("push flow: %v %+v", err, flow)
	}
}

// Each request's answer is merged: jids and existed in input order, conflicts indexed over the
// whole input, refs together.
func TestPushJIDsAndPushManyMergeEveryRequestsAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Jobs []plainSpec }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Error(err)
		}
		minimal := r.Header.Get("Prefer") == "return=minimal"
		var jobs, jids []string
		refs := map[string]string{}
		for _, spec := range body.Jobs {
			jids = append(jids, spec.JID)
			jobs = append(jobs, fmt.Sprintf(`{"jid":%q,"jobtype":"t","state":"available","created_at":"2026-12-05T05:16:24Z"}`, spec.JID))
			if spec.Ref != "" {
				refs[spec.Ref] = spec.JID
			}
		}
		answer := map[string]any{"jids": jids, "created": len(jids) - 1, "existed": jids[:1], "refs": refs,
			"conflicts": []UniqueConflict{{Index: 1, ExistingJID: jids[0], OnConflict: "existing"}}}
		if !minimal {
			answer["jobs"] = json.RawMessage("[" + strings.Join(jobs, ",") + "]")
		}
		_ = json.NewEncoder(w).Encode(answer)
	}))
	defer srv.Close()
	specs := make([]JobSpec, MaxBatch+2)
	for i := range specs {
		specs[i] = JobSpec{JobType: "t"}
	}
	specs[0].Ref, specs[MaxBatch+1].Ref = "head", "tail"
	c := NewClient(srv.URL)
	short, err := c.PushJIDs(context.Background(), specs)
	if err != nil {
		t.Fatal(err)
	}
	many, err := c.PushMany(context.Background(), specs)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]PushJIDsResult{"PushJIDs": *short, "PushMany": {JIDs: many.JIDs, Created: many.Created,
		Existed: many.Existed, Conflicts: many.Conflicts, Refs: many.Refs}} {
		if len(got.JIDs) != len(specs) || got.Created != len(specs)-2 || len(got.Existed) != 2 ||
			got.Existed[1] != got.JIDs[MaxBatch] || len(got.Conflicts) != 2 || got.Conflicts[1].Index != MaxBatch+1 ||
			got.Conflicts[1].ExistingJID != got.JIDs[MaxBatch] ||
			!reflect.DeepEqual(got.Refs, map[string]string{"head": got.JIDs[0], "tail": got.JIDs[MaxBatch+1]}) {
			t.Errorf("%s: %d jids, created %d, existed %v, conflicts %+v, refs %v", name, len(got.JIDs), got.Created,
				got.Existed, got.Conflicts, got.Refs)
		}
	}
	if len(many.Jobs) != len(specs) || len(many.JIDs) != len(specs) || many.Jobs[MaxBatch+1].JID != many.JIDs[MaxBatch+1] {
		t.Errorf("PushMany: %d jobs", len(many.Jobs))
	}
}

func TestBatchStatusCarriesCommittedAt(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	opened, err := c.CreateBatch(ctx, BatchNew{Description: "go-committed"})
	if err != nil || opened.CommittedAt != nil {
		t.Fatalf("open: %v %+v", err, opened)
	}
	before := time.Now().Add(-time.Minute)
	committed, err := c.CommitBatch(ctx, opened.BID)
	if err != nil || committed.CommittedAt == nil || committed.CommittedAt.Before(before) {
		t.Fatalf("commit: %v %+v", err, committed)
	}
	read, err := c.BatchStatus(ctx, opened.BID)
	if err != nil || read.CommittedAt == nil || !read.CommittedAt.Equal(*committed.CommittedAt) {
		t.Fatalf("status: %v %+v", err, read)
	}
}
