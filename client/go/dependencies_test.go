package werk

import (
	"context"
	"errors"
	"testing"
)

func TestFlowDependenciesAndResults(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	queue := uniqueQueue("go-d")
	pushed, err := c.PushFlow(ctx, []JobSpec{
		{JobType: "a", Queue: queue, Ref: "a"},
		{JobType: "b", Queue: queue, Ref: "b", DependsOn: []any{"a"}},
		{JobType: "c", Queue: queue, Ref: "c", DependsOn: []any{Needs{Job: "b", OnFailure: "skip"}}},
	})
	if err != nil || len(pushed.Refs) != 3 || pushed.Jobs[1].State != "waiting" {
		t.Fatalf("push flow: %v %+v", err, pushed)
	}
	jobs, err := c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-deps", Count: 10})
	if err != nil || len(jobs) != 1 || jobs[0].JID != pushed.Refs["a"] {
		t.Fatalf("fetch a: %v %+v", err, jobs)
	}
	if err := c.AckResult(ctx, jobs[0].JID, jobs[0].LeaseToken(), map[string]any{"rows": 3}); err != nil {
		t.Fatal(err)
	}
	jobs, err = c.Fetch(ctx, FetchRequest{Queues: []string{queue}, WID: "go-deps", Count: 10})
	if err != nil || len(jobs) != 1 || jobs[0].JID != pushed.Refs["b"] {
		t.Fatalf("fetch b: %v %+v", err, jobs)
	}
	no := false
	var got map[string]int
	if ok, err := jobs[0].DependencyResult("a", &got); !ok || err != nil || got["rows"] != 3 {
		t.Fatalf("dependency result: %v %v %+v", ok, err, got)
	}
	if _, err := c.Fail(ctx, jobs[0].JID, jobs[0].LeaseToken(), FailReport{ErrType: "E", Message: "m", Retry: &no}); err != nil {
		t.Fatal(err)
	}
	skipped, err := c.Get(ctx, pushed.Refs["c"])
	if err != nil || skipped.State != "skipped" {
		t.Fatalf("c: %v %+v", err, skipped)
	}
	_, err = c.PushFlow(ctx, []JobSpec{{JobType: "x", Queue: queue, Ref: "x", DependsOn: []any{"x"}}})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Code != "dependency_cycle" {
		t.Fatalf("cycle: %v", err)
	}
}
