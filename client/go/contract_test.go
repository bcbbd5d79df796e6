package werk

// Replays the language-neutral scenarios of client/contract/ through this package's Client.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var (
	varPattern   = regexp.MustCompile(`\$\{(\w+)\}`)
	wholeVar     = regexp.MustCompile(`^\$\{(\w+)\}$`)
	datetimeForm = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)
)

func substitute(v any, vars map[string]any) any {
	switch t := v.(type) {
	case string:
		if m := wholeVar.FindStringSubmatch(t); m != nil {
			return vars[m[1]]
		}
		return varPattern.ReplaceAllStringFunc(t, func(s string) string {
			return fmt.Sprint(vars[varPattern.FindStringSubmatch(s)[1]])
		})
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = substitute(x, vars)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, x := range t {
			out[k] = substitute(x, vars)
		}
		return out
	}
	return v
}

func typeOK(pattern string, actual any) bool {
	if strings.HasSuffix(pattern, "?") {
		if actual == nil {
			return true
		}
		pattern = strings.TrimSuffix(pattern, "?")
	}
	switch pattern {
	case "$any":
		return true
	case "$string":
		_, ok := actual.(string)
		return ok
	case "$integer":
		f, ok := actual.(float64)
		return ok && f == float64(int64(f))
	case "$number":
		_, ok := actual.(float64)
		return ok
	case "$boolean":
		_, ok := actual.(bool)
		return ok
	case "$datetime":
		s, ok := actual.(string)
		return ok && datetimeForm.MatchString(s)
	case "$array":
		_, ok := actual.([]any)
		return ok
	case "$object":
		_, ok := actual.(map[string]any)
		return ok
	}
	panic("unknown pattern " + pattern)
}

// mismatches follows client/contract/README.md: subset objects, exact arrays, $type patterns.
func mismatches(expected, actual any, path string) []string {
	if s, ok := expected.(string); ok && strings.HasPrefix(s, "$") {
		if typeOK(s, actual) {
			return nil
		}
		return []string{fmt.Sprintf("%s: expected %s, got %#v", path, s, actual)}
	}
	switch e := expected.(type) {
	case map[string]any:
		a, ok := actual.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: expected an object, got %#v", path, actual)}
		}
		var out []string
		keys := make([]string, 0, len(e))
		for k := range e {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, present := a[k]
			if !present {
				out = append(out, path+"."+k+": missing")
				continue
			}
			out = append(out, mismatches(e[k], v, path+"."+k)...)
		}
		return out
	case []any:
		a, ok := actual.([]any)
		if !ok || len(a) != len(e) {
			return []string{fmt.Sprintf("%s: expected %d items, got %#v", path, len(e), actual)}
		}
		var out []string
		for i := range e {
			out = append(out, mismatches(e[i], a[i], path+"."+strconv.Itoa(i))...)
		}
		return out
	}
	if fmt.Sprintf("%#v", expected) != fmt.Sprintf("%#v", actual) {
		return []string{fmt.Sprintf("%s: expected %#v, got %#v", path, expected, actual)}
	}
	return nil
}

// generic turns a typed result into the JSON value the scenario describes.
func generic(t *testing.T, v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func decode(t *testing.T, params map[string]any, into any) {
	data, _ := json.Marshal(params)
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("params %s do not fit %T: %v", data, into, err)
	}
}

func perform(t *testing.T, c *Client, op string, p map[string]any) (any, error) {
	ctx := context.Background()
	jid, _ := p["jid"].(string)
	lease, _ := p["lease"].(string)
	queue, _ := p["queue"].(string)
	wid, _ := p["wid"].(string)
	switch op {
	case "push":
		var spec JobSpec
		decode(t, p, &spec)
		return c.Push(ctx, spec)
	case "push_many":
		var body struct{ Jobs []JobSpec }
		decode(t, p, &body)
		return c.PushMany(ctx, body.Jobs)
	case "get":
		return c.Get(ctx, jid)
	case "info":
		return c.Info(ctx)
	case "fetch":
		var req FetchRequest
		decode(t, p, &req)
		jobs, err := c.Fetch(ctx, req)
		return map[string]any{"jobs": jobs}, err
	case "ack":
		return nil, c.AckResult(ctx, jid, lease, p["result"])
	case "result":
		wait, _ := p["wait"].(float64)
		return c.Result(ctx, jid, wait)
	case "dependencies":
		deps, err := c.Dependencies(ctx, jid)
		return map[string]any{"dependencies": deps, "next": nil}, err
	case "ack_many":
		var body struct{ Acks []AckItem }
		decode(t, p, &body)
		return c.AckMany(ctx, body.Acks)
	case "fail":
		var report FailReport
		decode(t, p, &report)
		return c.Fail(ctx, jid, lease, report)
	case "extend":
		var opts ExtendOptions
		decode(t, p, &opts)
		return c.Extend(ctx, jid, lease, opts)
	case "beat":
		var beat Beat
		decode(t, p, &beat)
		state, err := c.Beat(ctx, beat)
		return map[string]any{"state": state}, err
	case "batch_new":
		var spec BatchNew
		decode(t, p, &spec)
		return c.CreateBatch(ctx, spec)
	case "batch_open":
		return c.ReopenBatch(ctx, p["bid"].(string))
	case "batch_commit":
		return c.CommitBatch(ctx, p["bid"].(string))
	case "batch_status":
		return c.BatchStatus(ctx, p["bid"].(string))
	case "jobs_list":
		var filter JobFilter
		decode(t, p, &filter)
		return c.ListJobs(ctx, filter)
	case "job_retry":
		return c.RetryJob(ctx, jid)
	case "job_kill":
		return c.KillJob(ctx, jid)
	case "job_cancel":
		return c.CancelJob(ctx, jid)
	case "job_delete":
		return nil, c.DeleteJob(ctx, jid)
	case "jobs_retry", "jobs_kill", "jobs_cancel", "jobs_delete":
		var filter BulkFilter
		decode(t, p, &filter)
		bulk := map[string]func(context.Context, BulkFilter) (BulkResult, error){
			"jobs_retry": c.RetryJobs, "jobs_kill": c.KillJobs, "jobs_cancel": c.CancelJobs, "jobs_delete": c.DeleteJobs,
		}[op]
		return bulk(ctx, filter)
	case "queues_list":
		queues, err := c.ListQueues(ctx)
		return map[string]any{"queues": queues}, err
	case "queue_get":
		return c.Queue(ctx, queue)
	case "queue_pause":
		return c.PauseQueue(ctx, queue)
	case "queue_resume":
		return c.ResumeQueue(ctx, queue)
	case "queue_clear":
		deleted, err := c.ClearQueue(ctx, queue)
		return map[string]any{"queue": queue, "deleted": deleted}, err
	case "workers_list":
		includeGone, _ := p["include_gone"].(bool)
		workers, err := c.ListWorkers(ctx, includeGone)
		return map[string]any{"workers": workers}, err
	case "worker_quiet", "worker_terminate":
		signal := c.QuietWorker
		if op == "worker_terminate" {
			signal = c.TerminateWorker
		}
		state, err := signal(ctx, wid)
		return map[string]any{"wid": wid, "state": state}, err
	case "history":
		n, _ := p["days"].(float64)
		days, err := c.History(ctx, int(n), queue)
		return map[string]any{"days": days}, err
	case "batches_list":
		var filter BatchFilter
		decode(t, p, &filter)
		return c.ListBatches(ctx, filter)
	}
	t.Fatalf("unknown op %s", op)
	return nil, nil
}

func lookup(v any, dotted string) any {
	for _, part := range strings.Split(dotted, ".") {
		if list, ok := v.([]any); ok {
			i, _ := strconv.Atoi(part)
			v = list[i]
		} else {
			v = v.(map[string]any)[part]
		}
	}
	return v
}

func TestContract(t *testing.T) {
	c := testClient(t)
	files, _ := filepath.Glob("../contract/scenarios/*.json")
	if len(files) == 0 {
		t.Fatal("no scenarios in ../contract/scenarios")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var scenario struct {
			Name  string
			Steps []struct {
				Op     string
				Params map[string]any
				Expect map[string]any
				Save   map[string]string
			}
		}
		if err := json.Unmarshal(data, &scenario); err != nil {
			t.Fatal(err)
		}
		t.Run(scenario.Name, func(t *testing.T) {
			token := make([]byte, 4)
			_, _ = rand.Read(token)
			vars := map[string]any{"run": hex.EncodeToString(token)}
			for n, step := range scenario.Steps {
				where := fmt.Sprintf("step %d (%s)", n, step.Op)
				params, _ := substitute(map[string]any(step.Params), vars).(map[string]any)
				if params == nil {
					params = map[string]any{}
				}
				expect := substitute(step.Expect, vars).(map[string]any)
				result, err := perform(t, c, step.Op, params)
				if wantErr, ok := expect["error"]; ok {
					e, isWerk := AsError(err)
					if !isWerk {
						t.Fatalf("%s: expected %v, got result %#v (err %v)", where, wantErr, result, err)
					}
					got := generic(t, map[string]any{"status": e.Status, "code": e.Code, "errors": e.Errors})
					if m := mismatches(wantErr, got, "$"); len(m) > 0 {
						t.Fatalf("%s: %v", where, m)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				actual := generic(t, result)
				if m := mismatches(expect["result"], actual, "$"); len(m) > 0 {
					t.Fatalf("%s: %v", where, m)
				}
				for name, dotted := range step.Save {
					vars[name] = lookup(actual, dotted)
				}
			}
		})
	}
}
